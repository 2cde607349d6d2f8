//! Where a kernel's rows come from: a table's stored columns or a partitioning's buffers
//! (`kernel.rs`), or a grouping's slots (`groups.rs`). Generators ask for columns here and
//! need not know which.

use inkwell::values::IntValue;
use tessera_runtime::CodegenResult;

use crate::columns::ColumnId;

use super::kernel::Kernel;

impl<'ctx> Kernel<'_, 'ctx, '_> {
    /// How many rows the kernel's input has (an `i64`): what its loop over tiles covers.
    pub(super) fn input_rows(&self) -> CodegenResult<IntValue<'ctx>> {
        match self.groups {
            Some(_) => self.group_slots(),
            None => self.table_rows(),
        }
    }

    /// Makes sure the scanned columns among `ids` are in registers.
    pub fn load_columns(&mut self, ids: &[ColumnId]) -> CodegenResult<()> {
        for &id in ids {
            if self.tiles.contains_key(&id) || !self.pipeline.scanned.contains(&id) {
                continue;
            }
            match self.groups {
                Some(_) => self.load_group_column(id)?,
                None => self.load_table_column(id)?,
            }
        }
        Ok(())
    }
}
