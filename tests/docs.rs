//! The examples of docs/LANGUAGE.md: every block marked `tq` is a script that runs on the SSB
//! data through the command line (one with declarations only is compiled), so the documentation
//! and the language cannot drift apart.

mod common;

use std::process::Command;

/// The `tq` blocks of `text`, with the line each starts on.
fn script_blocks(text: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (index, line) in text.lines().enumerate() {
        match (&mut current, line.trim_end()) {
            (None, "```tq") => current = Some((index + 1, String::new())),
            (Some(_), "```") => blocks.extend(current.take()),
            (Some((_, body)), _) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

#[test]
fn every_script_in_the_language_reference_runs() {
    let path = common::repo().join("docs/LANGUAGE.md");
    let text = std::fs::read_to_string(&path).expect("docs/LANGUAGE.md");
    // Every block is marked: `tq` scripts, `text` for grammar and lists.
    let closing = text.lines().filter(|line| *line == "```").count();
    let marked = text
        .lines()
        .filter(|line| *line == "```tq" || *line == "```text")
        .count();
    assert_eq!(
        closing, marked,
        "an unmarked block in docs/LANGUAGE.md: mark it `tq` or `text`"
    );
    let blocks = script_blocks(&text);
    assert!(blocks.len() >= 20, "found only {} scripts", blocks.len());
    let dir = tempfile::tempdir().expect("a scratch folder");
    for (line, script) in blocks {
        let file = dir.path().join(format!("line{line}.tq"));
        std::fs::write(&file, &script).expect("script written");
        let declarations_only = !script.lines().any(|l| l.trim_start().starts_with("from "));
        let args: Vec<&str> = if declarations_only {
            vec!["compile", "--emit", "ast"]
        } else {
            vec!["run", "--device", "cpu", "--format", "csv"]
        };
        let output = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(&args)
            .arg(&file)
            .arg("--data")
            .arg(common::ssb_data())
            .env("TESSERA_CACHE_DIR", "")
            .output()
            .expect("tessera runs");
        assert!(
            output.status.success(),
            "docs/LANGUAGE.md line {line}:\n{script}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
