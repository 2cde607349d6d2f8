//! A column's values, held either in memory the process owns or in a read-only mapping of a
//! prepared file (`prepared`): both read as a slice, so kernels, encoders and result decoding
//! never ask which. A mapped region stays valid for as long as any `Values` over it lives.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use memmap2::Mmap;

/// Types whose every bit pattern is a value, so a mapped file's bytes can be read as them.
///
/// # Safety
///
/// Implementors must be plain data with no padding and no invalid bit patterns.
pub unsafe trait Plain: Copy + Send + Sync + 'static {}

// SAFETY: integers and floats of these widths have no padding and no invalid bit patterns.
unsafe impl Plain for u8 {}
unsafe impl Plain for i32 {}
unsafe impl Plain for u32 {}
unsafe impl Plain for i64 {}
unsafe impl Plain for u64 {}
unsafe impl Plain for i128 {}
unsafe impl Plain for f32 {}
unsafe impl Plain for f64 {}

pub struct Values<T> {
    repr: Repr<T>,
}

enum Repr<T> {
    Owned(Vec<T>),
    /// `len` values from byte `offset` of `map`, which holds at least `readable` values there
    /// (zero padding after the values, for readers that look past the end).
    Mapped {
        map: Arc<Mmap>,
        offset: usize,
        len: usize,
        readable: usize,
    },
}

/// Why a region of a mapping cannot be read as values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MapError {
    #[error("bytes {start}..{end} lie outside the file's {size} bytes")]
    OutOfBounds {
        start: usize,
        end: usize,
        size: usize,
    },
    #[error("byte {0} is not aligned for its values")]
    Misaligned(usize),
    #[error("a boolean byte holds {0}, not 0 or 1")]
    NotBool(u8),
}

impl<T> Values<T> {
    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the values are read from a mapped file rather than owned memory.
    pub fn is_mapped(&self) -> bool {
        matches!(self.repr, Repr::Mapped { .. })
    }

    pub fn as_slice(&self) -> &[T] {
        match &self.repr {
            Repr::Owned(values) => values,
            // SAFETY: `checked_region` proved the region in bounds and aligned when this was
            // made, the map lives as long as `self`, and `T` is plain data (or, for `bool`,
            // every byte was checked to be 0 or 1).
            Repr::Mapped {
                map, offset, len, ..
            } => unsafe { std::slice::from_raw_parts(map.as_ptr().add(*offset).cast(), *len) },
        }
    }

    /// The values followed by `extra` more that the backing memory holds as zeros, when it
    /// holds them (a mapped region padded for readers that look past the end).
    pub fn padded(&self, extra: usize) -> Option<&[T]> {
        match &self.repr {
            Repr::Mapped {
                map,
                offset,
                len,
                readable,
            } if len + extra <= *readable => {
                // SAFETY: as in `as_slice`; `readable` values lie in bounds (checked when made).
                Some(unsafe {
                    std::slice::from_raw_parts(map.as_ptr().add(*offset).cast(), len + extra)
                })
            }
            _ => None,
        }
    }

    /// The values as a vector to change, copying mapped values out first.
    pub fn to_mut(&mut self) -> &mut Vec<T>
    where
        T: Clone,
    {
        if let Repr::Mapped { .. } = self.repr {
            self.repr = Repr::Owned(self.as_slice().to_vec());
        }
        match &mut self.repr {
            Repr::Owned(values) => values,
            Repr::Mapped { .. } => unreachable!("mapped values were just copied out"),
        }
    }

    /// The owned vector, copying mapped values out.
    pub fn into_vec(self) -> Vec<T>
    where
        T: Clone,
    {
        match self.repr {
            Repr::Owned(values) => values,
            Repr::Mapped { .. } => self.as_slice().to_vec(),
        }
    }
}

impl<T: Plain> Values<T> {
    /// `len` values at byte `offset` of `map`, of which `readable` (≥ `len`) lie in the file.
    pub fn mapped(
        map: &Arc<Mmap>,
        offset: usize,
        len: usize,
        readable: usize,
    ) -> Result<Values<T>, MapError> {
        checked_region::<T>(map, offset, readable.max(len))?;
        Ok(Values {
            repr: Repr::Mapped {
                map: Arc::clone(map),
                offset,
                len,
                readable: readable.max(len),
            },
        })
    }
}

impl Values<bool> {
    /// `len` booleans at byte `offset` of `map`, after checking every byte is 0 or 1 (any other
    /// byte read as a `bool` would be undefined behaviour).
    pub fn mapped_bools(
        map: &Arc<Mmap>,
        offset: usize,
        len: usize,
    ) -> Result<Values<bool>, MapError> {
        checked_region::<u8>(map, offset, len)?;
        if let Some(&bad) = map[offset..offset + len].iter().find(|&&b| b > 1) {
            return Err(MapError::NotBool(bad));
        }
        Ok(Values {
            repr: Repr::Mapped {
                map: Arc::clone(map),
                offset,
                len,
                readable: len,
            },
        })
    }
}

/// Checks that `count` values of `T` at byte `offset` lie within `map` and are aligned.
fn checked_region<T>(map: &Mmap, offset: usize, count: usize) -> Result<(), MapError> {
    let bytes = count.checked_mul(std::mem::size_of::<T>());
    let end = bytes.and_then(|b| offset.checked_add(b));
    match end {
        Some(end) if end <= map.len() => {}
        _ => {
            return Err(MapError::OutOfBounds {
                start: offset,
                end: end.unwrap_or(usize::MAX),
                size: map.len(),
            })
        }
    }
    if !(map.as_ptr() as usize + offset).is_multiple_of(std::mem::align_of::<T>()) {
        return Err(MapError::Misaligned(offset));
    }
    Ok(())
}

impl<T> Deref for Values<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T> AsRef<[T]> for Values<T> {
    fn as_ref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: Clone> Clone for Values<T> {
    fn clone(&self) -> Values<T> {
        let repr = match &self.repr {
            Repr::Owned(values) => Repr::Owned(values.clone()),
            Repr::Mapped {
                map,
                offset,
                len,
                readable,
            } => Repr::Mapped {
                map: Arc::clone(map),
                offset: *offset,
                len: *len,
                readable: *readable,
            },
        };
        Values { repr }
    }
}

impl<T: fmt::Debug> fmt::Debug for Values<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_slice().fmt(f)
    }
}

impl<T: PartialEq> PartialEq for Values<T> {
    fn eq(&self, other: &Values<T>) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: Eq> Eq for Values<T> {}

impl<T: PartialEq> PartialEq<Vec<T>> for Values<T> {
    fn eq(&self, other: &Vec<T>) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: PartialEq, const N: usize> PartialEq<[T; N]> for Values<T> {
    fn eq(&self, other: &[T; N]) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T> Default for Values<T> {
    fn default() -> Values<T> {
        Values {
            repr: Repr::Owned(Vec::new()),
        }
    }
}

impl<T> From<Vec<T>> for Values<T> {
    fn from(values: Vec<T>) -> Values<T> {
        Values {
            repr: Repr::Owned(values),
        }
    }
}

impl<T> FromIterator<T> for Values<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Values<T> {
        Values::from(iter.into_iter().collect::<Vec<T>>())
    }
}

impl<'a, T> IntoIterator for &'a Values<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map_of(bytes: &[u8]) -> Arc<Mmap> {
        let mut file = tempfile::tempfile().expect("a temporary file");
        std::io::Write::write_all(&mut file, bytes).expect("written");
        // SAFETY: the file is private to this test and not changed while mapped.
        Arc::new(unsafe { Mmap::map(&file) }.expect("mapped"))
    }

    #[test]
    fn mapped_values_read_like_owned_ones() {
        let words: Vec<u8> = [7u32, 8, 9, 0]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        let map = map_of(&words);
        let values = Values::<u32>::mapped(&map, 0, 3, 4).expect("in bounds");
        assert!(values.is_mapped());
        assert_eq!(values, Values::from(vec![7u32, 8, 9]));
        assert_eq!(values.padded(1), Some(&[7u32, 8, 9, 0][..]));
        assert_eq!(values.padded(2), None);
        assert_eq!(values.clone().into_vec(), vec![7, 8, 9]);
        assert!(Values::<u32>::mapped(&map, 4, 4, 4).is_err());
        assert!(matches!(
            Values::<u32>::mapped(&map, 2, 1, 1),
            Err(MapError::Misaligned(2))
        ));
    }

    #[test]
    fn mapped_booleans_must_be_zero_or_one() {
        let map = map_of(&[1, 0, 1, 2]);
        let ok = Values::mapped_bools(&map, 0, 3).expect("0s and 1s");
        assert_eq!(ok.as_slice(), &[true, false, true]);
        assert_eq!(
            Values::mapped_bools(&map, 0, 4).err(),
            Some(MapError::NotBool(2))
        );
    }
}
