//! A run's device buffers, each allocated (and zeroed or patterned) once, before the first
//! kernel that names it is launched: what a run never launches — the kernels of a device sort
//! left to the host — is never allocated. The run allocates the buffers of every kernel sure
//! to run, and binds it, before launching any: doing so between launches, as the kernels
//! before run, left the device waiting on the host (measured on an H200: TPC-H Q21's kernels
//! spanned 5.0 ms instead of 3.8, its 60-million-slot groupings filled between launches; Q9,
//! binding between launches, was 0.3-0.7 ms slower).

use crate::program::{BufferSpec, KernelLaunch, Param};

use super::{Backend, RuntimeError};

pub(super) struct RunBuffers<'q> {
    specs: &'q [BufferSpec],
    /// Each buffer's bytes this run.
    sizes: &'q [u64],
    /// Each buffer's address, 0 until allocated.
    addresses: Vec<u64>,
    allocated: Vec<bool>,
}

impl<'q> RunBuffers<'q> {
    pub fn new(specs: &'q [BufferSpec], sizes: &'q [u64]) -> RunBuffers<'q> {
        RunBuffers {
            specs,
            sizes,
            addresses: vec![0; specs.len()],
            allocated: vec![false; specs.len()],
        }
    }

    /// Buffer `index`'s address, allocating it first if no kernel has needed it yet.
    pub fn ensure(&mut self, backend: &mut dyn Backend, index: usize) -> Result<u64, RuntimeError> {
        let missing = || RuntimeError::Malformed(format!("no buffer {index}"));
        if *self.allocated.get(index).ok_or_else(missing)? {
            return Ok(self.addresses[index]);
        }
        let spec = self.specs.get(index).ok_or_else(missing)?;
        let bytes = *self.sizes.get(index).ok_or_else(missing)?;
        let address = backend.buffer(spec, bytes)?;
        self.addresses[index] = address;
        self.allocated[index] = true;
        Ok(address)
    }

    /// Allocates every buffer `kernel` names.
    pub fn ensure_for(
        &mut self,
        backend: &mut dyn Backend,
        kernel: &KernelLaunch,
    ) -> Result<(), RuntimeError> {
        for param in &kernel.params {
            if let Param::Buffer(index) = param {
                self.ensure(backend, *index)?;
            }
        }
        Ok(())
    }

    /// Allocates every buffer not yet allocated but those only `unlaunched` kernels name, so
    /// that whatever the result reads exists (a buffer no kernel names reads as its fill).
    pub fn ensure_rest(
        &mut self,
        backend: &mut dyn Backend,
        unlaunched: &[KernelLaunch],
    ) -> Result<(), RuntimeError> {
        for index in 0..self.addresses.len() {
            // Not allocated yet, a buffer an unlaunched kernel names is named by no other.
            let named_by_unlaunched = unlaunched
                .iter()
                .any(|kernel| kernel.params.contains(&Param::Buffer(index)));
            if !self.allocated[index] && !named_by_unlaunched {
                self.ensure(backend, index)?;
            }
        }
        Ok(())
    }

    /// Every buffer's address, 0 for those not allocated (which no launched kernel names).
    pub fn addresses(&self) -> &[u64] {
        &self.addresses
    }
}

#[cfg(test)]
mod tests {
    use super::super::{readback::Gathered, stream, Cancel, ColumnBytes};
    use super::*;
    use crate::program::{Extent, Fill};
    use crate::TileShape;

    /// A backend that only hands out buffers, recording which.
    #[derive(Default)]
    struct Allocations(Vec<String>);

    fn unused() -> RuntimeError {
        RuntimeError::Malformed("not used by these tests".into())
    }

    impl Backend for Allocations {
        fn column(&mut self, _: &str, _: ColumnBytes) -> Result<u64, RuntimeError> {
            Err(unused())
        }
        fn buffer(&mut self, spec: &BufferSpec, _: u64) -> Result<u64, RuntimeError> {
            self.0.push(spec.name.clone());
            Ok(self.0.len() as u64 * 4096)
        }
        fn launch(
            &mut self,
            _: &KernelLaunch,
            _: u64,
            _: &[u64],
            _: Cancel<'_>,
        ) -> Result<(), RuntimeError> {
            Err(unused())
        }
        fn wait(&mut self, _: Cancel<'_>) -> Result<(Vec<f64>, f64), RuntimeError> {
            Err(unused())
        }
        fn copy_bandwidth(&mut self) -> Result<f64, RuntimeError> {
            Err(unused())
        }
        fn read(&mut self, _: u64, _: u64, _: u64) -> Result<Vec<u8>, RuntimeError> {
            Err(unused())
        }
        fn gather_present(
            &mut self,
            _: u64,
            _: u32,
            _: u64,
            _: &[(u64, u32)],
            _: u64,
        ) -> Result<Option<Gathered>, RuntimeError> {
            Err(unused())
        }
        fn stage(&mut self, _: usize, _: &stream::Piece<'_>) -> Result<u64, RuntimeError> {
            Err(unused())
        }
        fn release_buffers(&mut self) {}
    }

    fn buffer(name: &str) -> BufferSpec {
        BufferSpec {
            name: name.into(),
            elements: 4,
            element_bytes: 4,
            fill: Fill::Zero,
            per_group_slot: false,
            per_row_of: Vec::new(),
            rows_per_element: 1,
            output: false,
        }
    }

    fn kernel(buffers: &[usize]) -> KernelLaunch {
        KernelLaunch {
            name: "k".into(),
            table: "t".into(),
            tile: TileShape {
                threads: 1,
                items_per_thread: 1,
            },
            params: buffers.iter().map(|&b| Param::Buffer(b)).collect(),
            extent: Extent::Tiles,
            runs_in_pieces: false,
            notes: Vec::new(),
        }
    }

    #[test]
    fn buffers_are_allocated_once_when_a_kernel_first_needs_them() {
        let specs = [
            buffer("status"),
            buffer("rows"),
            buffer("sort words"),
            buffer("count"),
        ];
        let sizes = [16; 4];
        let mut backend = Allocations::default();
        let mut buffers = RunBuffers::new(&specs, &sizes);
        let status = buffers.ensure(&mut backend, 0).expect("allocates");
        let kernels = [kernel(&[0, 1]), kernel(&[0, 1, 2])];
        buffers
            .ensure_for(&mut backend, &kernels[0])
            .expect("allocates");
        assert_eq!(backend.0, ["status", "rows"]);
        assert_eq!(buffers.ensure(&mut backend, 0).expect("allocated"), status);
        // The second kernel is not launched: its sort words are never allocated, and the
        // count, which no kernel names, is.
        buffers
            .ensure_rest(&mut backend, &kernels[1..])
            .expect("allocates");
        assert_eq!(backend.0, ["status", "rows", "count"]);
        assert_eq!(buffers.addresses()[2], 0);
        assert!(buffers.ensure(&mut backend, 4).is_err());
    }
}
