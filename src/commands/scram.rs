//! SCRAM-SHA-256 (RFC 5802 and RFC 7677), the password exchange PostgreSQL's clients speak, on
//! the server's side: the client proves it knows the password without sending it, and proves
//! nothing to an eavesdropper who replays the exchange. The server keeps only the stored and
//! server keys (PostgreSQL's verifier), made from the password or read as a verifier. Channel
//! binding (`SCRAM-SHA-256-PLUS`) needs TLS, which the server does not speak.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

/// The mechanism's name, as clients ask for it.
pub const MECHANISM: &str = "SCRAM-SHA-256";

/// Iterations of the password hash when the server derives a credential from a password
/// (PostgreSQL's default).
const ITERATIONS: u32 = 4096;

/// What the server knows of the password: a salt, an iteration count, and the keys derived.
#[derive(Clone)]
pub struct Credential {
    salt: Vec<u8>,
    iterations: u32,
    stored_key: [u8; 32],
    server_key: [u8; 32],
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Credential { .. }")
    }
}

/// Why an exchange failed.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ScramError {
    #[error("the client asked for {0}, and the server offers only SCRAM-SHA-256")]
    Mechanism(String),
    #[error("the client's SCRAM message is malformed ({0})")]
    Malformed(&'static str),
    #[error("the client asked for channel binding, which needs TLS")]
    ChannelBinding,
    #[error("the password is wrong")]
    WrongPassword,
}

impl Credential {
    /// The credential of `password`, with a fresh random salt.
    pub fn from_password(password: &str) -> std::io::Result<Credential> {
        let salt = random_bytes::<16>()?.to_vec();
        Ok(Credential::derive(password, salt, ITERATIONS))
    }

    fn derive(password: &str, salt: Vec<u8>, iterations: u32) -> Credential {
        // Clients normalize the password with SASLprep where it allows, as PostgreSQL does.
        let normalized = stringprep::saslprep(password)
            .map(|p| p.into_owned())
            .unwrap_or_else(|_| password.to_string());
        let salted = hi(normalized.as_bytes(), &salt, iterations);
        let client_key = hmac(&salted, b"Client Key");
        Credential {
            salt,
            iterations,
            stored_key: Sha256::digest(client_key).into(),
            server_key: hmac(&salted, b"Server Key"),
        }
    }

    /// A verifier as PostgreSQL stores it:
    /// `SCRAM-SHA-256$<iterations>:<salt>$<stored key>:<server key>`, base64 each.
    pub fn from_verifier(text: &str) -> Option<Credential> {
        let rest = text.strip_prefix("SCRAM-SHA-256$")?;
        let (salting, keys) = rest.split_once('$')?;
        let (iterations, salt) = salting.split_once(':')?;
        let (stored, server) = keys.split_once(':')?;
        Some(Credential {
            iterations: iterations.parse().ok().filter(|i| *i > 0)?,
            salt: STANDARD.decode(salt).ok()?,
            stored_key: STANDARD.decode(stored).ok()?.try_into().ok()?,
            server_key: STANDARD.decode(server).ok()?.try_into().ok()?,
        })
    }
}

/// One client's exchange: the client's first message, the server's challenge, the client's
/// proof, the server's signature.
pub struct Exchange {
    credential: Credential,
    /// After the server's first message: what the proof is computed over so far.
    sent: Option<Sent>,
}

struct Sent {
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
}

impl Exchange {
    pub fn new(credential: Credential) -> Exchange {
        Exchange {
            credential,
            sent: None,
        }
    }

    /// Whether the server's first message was sent (the next message is the proof).
    pub fn challenged(&self) -> bool {
        self.sent.is_some()
    }

    /// The server's first message (salt, iterations and the nonce extended), answering the
    /// client's first message for `mechanism`.
    pub fn challenge(
        &mut self,
        mechanism: &str,
        client_first: &[u8],
    ) -> Result<String, ScramError> {
        let server_nonce = random_bytes::<18>().map_err(|_| ScramError::Malformed("no nonce"))?;
        self.challenge_with(mechanism, client_first, &STANDARD.encode(server_nonce))
    }

    /// [`Exchange::challenge`] with the server's part of the nonce given.
    fn challenge_with(
        &mut self,
        mechanism: &str,
        client_first: &[u8],
        server_nonce: &str,
    ) -> Result<String, ScramError> {
        if mechanism != MECHANISM {
            return Err(ScramError::Mechanism(mechanism.to_string()));
        }
        let text =
            std::str::from_utf8(client_first).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        // gs2-header: a channel-binding flag and an optional authorization identity.
        let mut parts = text.splitn(3, ',');
        let binding = parts.next().unwrap_or_default();
        let authzid = parts.next().ok_or(ScramError::Malformed("no GS2 header"))?;
        let bare = parts
            .next()
            .ok_or(ScramError::Malformed("no first message"))?;
        match binding {
            "n" | "y" => {}
            flag if flag.starts_with("p=") => return Err(ScramError::ChannelBinding),
            _ => return Err(ScramError::Malformed("an unknown channel-binding flag")),
        }
        // The user name (`n=`, which PostgreSQL's clients leave empty) is not used: the startup
        // message named the user, and every user shares the password.
        let client_nonce = bare
            .split(',')
            .find_map(|attribute| attribute.strip_prefix("r="))
            .filter(|nonce| !nonce.is_empty() && nonce.bytes().all(|b| b.is_ascii_graphic()))
            .ok_or(ScramError::Malformed("no nonce"))?;
        let nonce = format!("{client_nonce}{server_nonce}");
        let server_first = format!(
            "r={nonce},s={},i={}",
            STANDARD.encode(&self.credential.salt),
            self.credential.iterations
        );
        self.sent = Some(Sent {
            gs2_header: format!("{binding},{authzid},"),
            client_first_bare: bare.to_string(),
            server_first: server_first.clone(),
            nonce,
        });
        Ok(server_first)
    }

    /// Checks the client's proof; on success, the server's final message (its signature,
    /// which proves to the client that the server knew the password too).
    pub fn verify(&mut self, client_final: &[u8]) -> Result<String, ScramError> {
        let sent = self
            .sent
            .take()
            .ok_or(ScramError::Malformed("a proof before the first message"))?;
        let text =
            std::str::from_utf8(client_final).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        let (without_proof, proof) = text
            .rsplit_once(",p=")
            .ok_or(ScramError::Malformed("no proof"))?;
        let mut binding = None;
        let mut nonce = None;
        for attribute in without_proof.split(',') {
            if let Some(value) = attribute.strip_prefix("c=") {
                binding = Some(value);
            } else if let Some(value) = attribute.strip_prefix("r=") {
                nonce = Some(value);
            }
        }
        if binding != Some(STANDARD.encode(&sent.gs2_header).as_str()) {
            return Err(ScramError::Malformed("the channel binding differs"));
        }
        if nonce != Some(sent.nonce.as_str()) {
            return Err(ScramError::Malformed("the nonce differs"));
        }
        let proof: [u8; 32] = STANDARD
            .decode(proof)
            .ok()
            .and_then(|p| p.try_into().ok())
            .ok_or(ScramError::Malformed("the proof is not 32 bytes of base64"))?;
        let auth_message = format!(
            "{},{},{without_proof}",
            sent.client_first_bare, sent.server_first
        );
        let client_signature = hmac(&self.credential.stored_key, auth_message.as_bytes());
        let client_key: Vec<u8> = proof
            .iter()
            .zip(client_signature)
            .map(|(p, s)| p ^ s)
            .collect();
        let stored: [u8; 32] = Sha256::digest(&client_key).into();
        // Compared in constant time: how long a comparison takes says nothing of the key.
        let differs = stored
            .iter()
            .zip(self.credential.stored_key)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        if differs != 0 {
            return Err(ScramError::WrongPassword);
        }
        let server_signature = hmac(&self.credential.server_key, auth_message.as_bytes());
        Ok(format!("v={}", STANDARD.encode(server_signature)))
    }
}

fn hmac(key: &[u8], message: &[u8]) -> [u8; 32] {
    // HMAC takes a key of any length.
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC accepts keys of any length"));
    mac.update(message);
    mac.finalize().into_bytes().into()
}

/// PBKDF2 with HMAC-SHA-256, for one block of output: `Hi` of RFC 5802.
fn hi(password: &[u8], salt: &[u8], iterations: u32) -> [u8; 32] {
    let mut first = salt.to_vec();
    first.extend_from_slice(&1u32.to_be_bytes());
    let mut previous = hmac(password, &first);
    let mut result = previous;
    for _ in 1..iterations {
        previous = hmac(password, &previous);
        for (r, p) in result.iter_mut().zip(previous) {
            *r ^= p;
        }
    }
    result
}

fn random_bytes<const N: usize>() -> std::io::Result<[u8; N]> {
    use std::io::Read;
    let mut bytes = [0u8; N];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256};

    /// A whole exchange against the SCRAM client PostgreSQL's Rust driver uses.
    fn exchange(server: Credential, password: &str) -> Result<(), ScramError> {
        let mut client = ScramSha256::new(password.as_bytes(), ChannelBinding::unsupported());
        let mut exchange = Exchange::new(server);
        let challenge = exchange.challenge(MECHANISM, client.message())?;
        client
            .update(challenge.as_bytes())
            .expect("the client takes the challenge");
        let signature = exchange.verify(client.message())?;
        client
            .finish(signature.as_bytes())
            .expect("the client accepts the server's signature");
        Ok(())
    }

    #[test]
    fn the_right_password_passes_and_a_wrong_one_does_not() {
        let credential = Credential::from_password("correct horse").expect("random bytes");
        assert_eq!(exchange(credential.clone(), "correct horse"), Ok(()));
        assert_eq!(
            exchange(credential, "correct horsE"),
            Err(ScramError::WrongPassword)
        );
    }

    #[test]
    fn a_postgresql_verifier_serves_as_the_credential() {
        let verifier = postgres_protocol::password::scram_sha_256(b"s3cret");
        let credential = Credential::from_verifier(&verifier).expect("a verifier");
        assert_eq!(exchange(credential.clone(), "s3cret"), Ok(()));
        assert_eq!(
            exchange(credential, "secret"),
            Err(ScramError::WrongPassword)
        );
        assert!(Credential::from_verifier("SCRAM-SHA-256$4096:c2FsdA==$bad").is_none());
    }

    #[test]
    fn malformed_messages_and_channel_binding_are_refused() {
        let credential = Credential::from_password("p").expect("random bytes");
        let mut exchange = Exchange::new(credential.clone());
        assert_eq!(
            exchange.challenge("SCRAM-SHA-1", b"n,,n=,r=abc"),
            Err(ScramError::Mechanism("SCRAM-SHA-1".into()))
        );
        assert_eq!(
            exchange.challenge(MECHANISM, b"p=tls-server-end-point,,n=,r=abc"),
            Err(ScramError::ChannelBinding)
        );
        assert!(exchange.challenge(MECHANISM, b"n,,n=").is_err());
        assert!(exchange.verify(b"c=biws,r=abc,p=AAAA").is_err());
        let mut replayed = Exchange::new(credential);
        replayed
            .challenge(MECHANISM, b"n,,n=,r=abc")
            .expect("a challenge");
        // A proof for another nonce (an earlier exchange's) is refused.
        assert_eq!(
            replayed.verify(b"c=biws,r=abcdef,p=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="),
            Err(ScramError::Malformed("the nonce differs"))
        );
    }

    #[test]
    fn rfc_7677s_example_exchange() {
        // RFC 7677, section 3: user "user", password "pencil", every message given.
        let salt = STANDARD.decode("W22ZaJ0SNY7soEsUEjb6gQ==").expect("base64");
        let mut exchange = Exchange::new(Credential::derive("pencil", salt, 4096));
        let challenge = exchange
            .challenge_with(
                MECHANISM,
                b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
                "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
            )
            .expect("a challenge");
        assert_eq!(
            challenge,
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
        );
        let signature = exchange
            .verify(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
            .expect("the example's proof");
        assert_eq!(signature, "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
    }
}
