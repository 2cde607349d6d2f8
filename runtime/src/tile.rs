//! Targets and tile shapes: what a kernel is compiled for and how many rows one thread block
//! (one OS thread on the host) processes at a time.

use std::fmt;

use tessera_storage::compress::{Family, Scheme};

/// The most parameters a GPU kernel takes one by one (2 KiB of 64-bit words, half of what
/// PTX allows, since a parameter's size is rounded up and the limit counts them all).
pub const DIRECT_GPU_PARAMS: usize = 256;

/// Whether a GPU kernel of `count` parameters reads them from a table ([`Target::params_in_table`]).
pub fn gpu_params_in_table(count: usize) -> bool {
    count > DIRECT_GPU_PARAMS
}

/// Where generated code runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Target {
    /// The CPU running Tessera: one thread per tile, tiles spread over all cores.
    Host,
    /// An NVIDIA GPU of compute capability `sm` (90 for H100 and H200), through PTX.
    Nvptx { sm: u32 },
}

impl Target {
    pub fn is_gpu(self) -> bool {
        matches!(self, Target::Nvptx { .. })
    }

    /// Whether a kernel of `count` parameters receives them as one address of a table of
    /// 64-bit words, which the launcher fills, rather than one by one. The host's kernels
    /// always do. A GPU kernel's parameters travel in 4 KiB of constant memory (PTX before
    /// 8.1), which an `aggregate` of hundreds of aggregates (a buffer each) outgrows; past
    /// [`DIRECT_GPU_PARAMS`] the kernel reads its table at entry instead.
    pub fn params_in_table(self, count: usize) -> bool {
        match self {
            Target::Host => true,
            Target::Nvptx { .. } => gpu_params_in_table(count),
        }
    }

    /// The tile shape of queries reading plain columns only ([`Target::tile_for`]), unless a
    /// pipeline asks for another.
    pub fn default_tile(self) -> TileShape {
        match self {
            // Measured on an H100 (SSB, SF 20): 256x4 matched 128x4 on scans and probes and was
            // 15-30% faster where blocks aggregate groups locally (fewer, fuller blocks merge
            // less); more items per thread was slower everywhere (docs/PERFORMANCE.md).
            Target::Nvptx { .. } => TileShape {
                threads: 256,
                items_per_thread: 4,
            },
            // One thread per tile, so barriers vanish and the item loop is a plain loop that
            // LLVM can vectorize; 2048 rows keep a tile's columns in L1.
            Target::Host => TileShape {
                threads: 1,
                items_per_thread: 2048,
            },
        }
    }
}

impl Target {
    /// The tile shape of queries reading columns packed in blocks and none at one width
    /// ([`Target::tile_for`]), unless a pipeline asks for another. Measured on an H100 (SSB and decode-and-sum, docs/PERFORMANCE.md): decoding
    /// pays per tile for staging, block headers and three barriers, which 128x16 spreads over
    /// four times the items per thread of 256x4 (packed SSB 9% faster than at 128x8).
    pub fn default_packed_tile(self) -> TileShape {
        match self {
            Target::Nvptx { .. } => TileShape {
                threads: 128,
                items_per_thread: 16,
            },
            Target::Host => self.default_tile(),
        }
    }
}

impl Target {
    /// The tile shape of queries reading columns packed at one width (`pack`, `dict`, most of
    /// what `auto` packs; [`Target::tile_for`]), unless a pipeline asks for another. Measured
    /// on an H100 (SSB SF 20, `--compress auto`, docs/PERFORMANCE.md): geomean 0.606-0.616 ms
    /// at 512x4 against 0.627 at 256x4, 0.607 at 1024x4 (Q1.x faster, probes slower), 0.707 at
    /// 512x2 and 0.683 at 256x8; plain columns ran the same at 512x4 as at 256x4 (0.559 ms).
    pub fn default_fixed_width_tile(self) -> TileShape {
        match self {
            Target::Nvptx { .. } => TileShape {
                threads: 512,
                items_per_thread: 4,
            },
            Target::Host => self.default_tile(),
        }
    }
}

impl Target {
    /// The tile shape of a query's kernels when none is asked for, from the schemes its stored
    /// columns are kept in (`stored`), by the family of each one's decoder
    /// ([`Scheme::reading`]): the tile measured best for columns packed at one width where it
    /// reads any (it holds whole blocks of 128 too, so columns in blocks are staged in it),
    /// else the packed tile where it reads columns in blocks, else the plain tile.
    pub fn tile_for(self, stored: impl IntoIterator<Item = Scheme>) -> TileShape {
        let families: Vec<Family> = stored.into_iter().map(|s| s.reading().family).collect();
        if families.contains(&Family::FixedWidth) {
            self.default_fixed_width_tile()
        } else if families.contains(&Family::Blocks) {
            self.default_packed_tile()
        } else {
            self.default_tile()
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Host => f.write_str("host"),
            Target::Nvptx { sm } => write!(f, "sm_{sm}"),
        }
    }
}

/// `threads × items_per_thread` rows per tile. Each thread holds `items_per_thread` items in
/// registers; item `i` of thread `t` is row `tile_start + i * threads + t` (striped), so a warp's
/// loads of one item are contiguous.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct TileShape {
    pub threads: u32,
    pub items_per_thread: u32,
}

impl TileShape {
    pub fn items(self) -> u32 {
        self.threads * self.items_per_thread
    }

    pub fn warps(self) -> u32 {
        self.threads.div_ceil(32)
    }
}

impl fmt::Display for TileShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.threads, self.items_per_thread)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_querys_tile_follows_how_its_columns_are_stored() {
        let gpu = Target::Nvptx { sm: 90 };
        assert_eq!(gpu.tile_for([]), gpu.default_tile());
        assert_eq!(gpu.tile_for([Scheme::None]), gpu.default_tile());
        assert_eq!(
            gpu.tile_for([Scheme::None, Scheme::Dfor]),
            gpu.default_packed_tile()
        );
        // Columns at one width take their tile, which holds whole blocks for the others.
        for mixed in [[Scheme::For, Scheme::Pack], [Scheme::Dict, Scheme::None]] {
            assert_eq!(gpu.tile_for(mixed), gpu.default_fixed_width_tile());
        }
        for scheme in Scheme::ALL {
            assert!(crate::primitives::unpack::fits(
                gpu,
                gpu.default_fixed_width_tile(),
                scheme
            ));
        }
        assert_eq!(
            Target::Host.tile_for([Scheme::For]),
            Target::Host.default_tile()
        );
    }
}
