//! A thin layer over inkwell so that primitives and kernels read like Crystal's CUDA: thread
//! and block ids, barriers, warp shuffles, an item loop (unrolled on the GPU, a plain loop on the
//! host), per-thread tile arrays, conditionals. Everything target-specific is decided here.

use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::basic_block::BasicBlock;
use inkwell::builder::{Builder, BuilderError};
use inkwell::context::Context;
use inkwell::module::{Linkage, Module};
use inkwell::types::{
    BasicMetadataTypeEnum, BasicType, BasicTypeEnum, FunctionType, IntType, PointerType,
};
use inkwell::values::{
    BasicMetadataValueEnum, BasicValue, BasicValueEnum, FunctionValue, IntValue, PointerValue,
};
use inkwell::{AddressSpace, IntPredicate};
use tessera_storage::DataType;

use crate::tile::{Target, TileShape};

#[derive(Debug, thiserror::Error)]
pub enum CodegenError {
    #[error("LLVM IR construction failed: {0}")]
    Builder(#[from] BuilderError),
    #[error("{0}")]
    Invalid(String),
}

pub type CodegenResult<T> = Result<T, CodegenError>;

pub const GLOBAL: u16 = 1;
pub const SHARED: u16 = 3;

/// One item of a thread's tile: a constant on the GPU (the loop is unrolled, so the tile's
/// arrays become registers), a loop variable on the host.
#[derive(Clone, Copy)]
pub struct Item<'ctx> {
    pub index: IntValue<'ctx>,
}

/// A per-thread array of `len` values of `elem`, one per item of the tile.
#[derive(Clone, Copy)]
pub struct TileArray<'ctx> {
    pub ptr: PointerValue<'ctx>,
    pub elem: BasicTypeEnum<'ctx>,
    pub len: u32,
}

/// A kernel's parameters as its code reads them.
pub enum KernelArgs<'ctx> {
    /// Values at hand: the GPU kernel's parameters, or the words the host's kernel read in.
    Values(Vec<BasicValueEnum<'ctx>>),
    /// Words of a table in device memory (a GPU kernel of many parameters), each loaded where
    /// the code uses it: loaded all at the start, hundreds of them would stay live through the
    /// kernel, and the driver's compiler spends minutes spilling them.
    Table {
        table: PointerValue<'ctx>,
        pointers: Vec<bool>,
    },
}

impl<'ctx> KernelArgs<'ctx> {
    /// Parameter `index`; from a table, loaded at the builder's position.
    pub fn get(&self, em: &Emitter<'ctx, '_>, index: usize) -> CodegenResult<BasicValueEnum<'ctx>> {
        let missing = || CodegenError::Invalid(format!("kernel parameter {index} is missing"));
        match self {
            KernelArgs::Values(values) => values.get(index).copied().ok_or_else(missing),
            KernelArgs::Table { table, pointers } => {
                let pointer = *pointers.get(index).ok_or_else(missing)?;
                let i64t = em.i64();
                let slot = em.offset_ptr(i64t.into(), *table, em.const_i64(index as i64))?;
                let word = em.b.build_load(i64t, slot, "")?.into_int_value();
                Ok(if pointer {
                    em.b.build_int_to_ptr(word, table.get_type(), "")?.into()
                } else {
                    word.into()
                })
            }
        }
    }
}

/// Builds the body of one LLVM function for a target and tile shape.
pub struct Emitter<'ctx, 'm> {
    pub ctx: &'ctx Context,
    pub module: &'m Module<'ctx>,
    pub b: Builder<'ctx>,
    pub target: Target,
    pub tile: TileShape,
    pub function: FunctionValue<'ctx>,
    alloca_block: BasicBlock<'ctx>,
}

impl<'ctx, 'm> Emitter<'ctx, 'm> {
    /// Starts a new function; the builder is left in its first block after the allocas.
    pub fn new_function(
        ctx: &'ctx Context,
        module: &'m Module<'ctx>,
        target: Target,
        tile: TileShape,
        name: &str,
        ty: FunctionType<'ctx>,
        linkage: Linkage,
    ) -> CodegenResult<Emitter<'ctx, 'm>> {
        let function = module.add_function(name, ty, Some(linkage));
        let alloca_block = ctx.append_basic_block(function, "allocas");
        let start = ctx.append_basic_block(function, "start");
        let b = ctx.create_builder();
        b.position_at_end(alloca_block);
        b.build_unconditional_branch(start)?;
        b.position_at_end(start);
        Ok(Emitter {
            ctx,
            module,
            b,
            target,
            tile,
            function,
            alloca_block,
        })
    }

    /// Declares the function a CUDA kernel of blocks of `threads` threads (`nvvm.annotations`).
    pub fn mark_kernel(&self, threads: u32) {
        let function = self.function.as_global_value().as_pointer_value();
        for (key, value) in [("kernel", 1), ("maxntidx", threads)] {
            let node = self.ctx.metadata_node(&[
                function.into(),
                self.ctx.metadata_string(key).into(),
                self.i32().const_int(u64::from(value), false).into(),
            ]);
            // Adding metadata only fails for a name clash with a non-metadata global.
            let _ = self.module.add_global_metadata("nvvm.annotations", &node);
        }
    }

    /// Starts a kernel taking one 64-bit parameter per entry of `pointers`, a global pointer
    /// where it is true. On the GPU they are the kernel's parameters, or past
    /// [`Target::params_in_table`]'s count words of a table it is given the address of; on the
    /// host the function takes a block of 64-bit words holding them and the range of tiles (or
    /// parts) to run, and reads them in. Returns the emitter and the parameters.
    pub fn new_kernel(
        ctx: &'ctx Context,
        module: &'m Module<'ctx>,
        target: Target,
        tile: TileShape,
        name: &str,
        pointers: &[bool],
    ) -> CodegenResult<(Emitter<'ctx, 'm>, KernelArgs<'ctx>)> {
        let i64t = ctx.i64_type();
        let global = match target {
            Target::Nvptx { .. } => ctx.ptr_type(AddressSpace::from(GLOBAL)),
            Target::Host => ctx.ptr_type(AddressSpace::default()),
        };
        let in_table = target.params_in_table(pointers.len());
        let ty = match target {
            Target::Nvptx { .. } if in_table => ctx.void_type().fn_type(&[global.into()], false),
            Target::Nvptx { .. } => {
                let args: Vec<BasicMetadataTypeEnum> = pointers
                    .iter()
                    .map(|&pointer| if pointer { global.into() } else { i64t.into() })
                    .collect();
                ctx.void_type().fn_type(&args, false)
            }
            Target::Host => ctx
                .void_type()
                .fn_type(&[global.into(), i64t.into(), i64t.into()], false),
        };
        let em = Emitter::new_function(ctx, module, target, tile, name, ty, Linkage::External)?;
        let parameter = |i: u32| {
            em.function
                .get_nth_param(i)
                .ok_or_else(|| CodegenError::Invalid(format!("kernel parameter {i} is missing")))
        };
        let args = if in_table {
            let table = KernelArgs::Table {
                table: parameter(0)?.into_pointer_value(),
                pointers: pointers.to_vec(),
            };
            match target {
                // The host's few hundred words are read once per call, at its start.
                Target::Host => KernelArgs::Values(
                    (0..pointers.len())
                        .map(|i| table.get(&em, i))
                        .collect::<CodegenResult<_>>()?,
                ),
                Target::Nvptx { .. } => table,
            }
        } else {
            KernelArgs::Values(
                (0..pointers.len() as u32)
                    .map(parameter)
                    .collect::<CodegenResult<_>>()?,
            )
        };
        if target.is_gpu() {
            em.mark_kernel(tile.threads);
        }
        Ok((em, args))
    }

    /// A kernel taking `count` 64-bit numbers (addresses become pointers where they are used),
    /// and their values, read at its start.
    pub fn new_word_kernel(
        ctx: &'ctx Context,
        module: &'m Module<'ctx>,
        target: Target,
        tile: TileShape,
        name: &str,
        count: usize,
    ) -> CodegenResult<(Emitter<'ctx, 'm>, Vec<IntValue<'ctx>>)> {
        let (em, args) = Emitter::new_kernel(ctx, module, target, tile, name, &vec![false; count])?;
        let words = (0..count)
            .map(|i| Ok(args.get(&em, i)?.into_int_value()))
            .collect::<CodegenResult<_>>()?;
        Ok((em, words))
    }

    /// Marks the function to be inlined into every caller (primitives).
    pub fn always_inline(&self) {
        let kind = Attribute::get_named_enum_kind_id("alwaysinline");
        self.function.add_attribute(
            AttributeLoc::Function,
            self.ctx.create_enum_attribute(kind, 0),
        );
    }

    pub fn i1(&self) -> IntType<'ctx> {
        self.ctx.bool_type()
    }
    pub fn i8(&self) -> IntType<'ctx> {
        self.ctx.i8_type()
    }
    pub fn i32(&self) -> IntType<'ctx> {
        self.ctx.i32_type()
    }
    pub fn i64(&self) -> IntType<'ctx> {
        self.ctx.i64_type()
    }

    /// The integer type of `bits` bits (1, 8, 16, 32, 64 or 128).
    pub fn int_type(&self, bits: u32) -> IntType<'ctx> {
        match bits {
            1 => self.ctx.bool_type(),
            8 => self.ctx.i8_type(),
            16 => self.ctx.i16_type(),
            32 => self.ctx.i32_type(),
            128 => self.ctx.i128_type(),
            _ => self.ctx.i64_type(),
        }
    }

    pub fn const_i32(&self, v: i64) -> IntValue<'ctx> {
        self.i32().const_int(v as u64, true)
    }
    pub fn const_i64(&self, v: i64) -> IntValue<'ctx> {
        self.i64().const_int(v as u64, true)
    }

    /// Pointers to device memory: the global address space on the GPU.
    pub fn global_ptr(&self) -> PointerType<'ctx> {
        match self.target {
            Target::Nvptx { .. } => self.ctx.ptr_type(AddressSpace::from(GLOBAL)),
            Target::Host => self.ctx.ptr_type(AddressSpace::default()),
        }
    }

    pub fn local_ptr(&self) -> PointerType<'ctx> {
        self.ctx.ptr_type(AddressSpace::default())
    }

    pub fn shared_ptr(&self) -> PointerType<'ctx> {
        match self.target {
            Target::Nvptx { .. } => self.ctx.ptr_type(AddressSpace::from(SHARED)),
            Target::Host => self.ctx.ptr_type(AddressSpace::default()),
        }
    }

    /// The register type of a column type (strings are codes, dates are day numbers).
    pub fn value_type(&self, ty: DataType) -> BasicTypeEnum<'ctx> {
        match ty {
            DataType::Decimal(decimal) if decimal.is_wide() => self.ctx.i128_type().into(),
            DataType::Bool => self.i8().into(),
            DataType::I32 | DataType::Date | DataType::Str => self.i32().into(),
            DataType::I64 | DataType::Decimal(_) | DataType::Timestamp | DataType::Time => {
                self.i64().into()
            }
            DataType::F32 => self.ctx.f32_type().into(),
            DataType::F64 => self.ctx.f64_type().into(),
        }
    }

    /// The thread's index within its block (0 on the host).
    pub fn tid(&self) -> CodegenResult<IntValue<'ctx>> {
        match self.target {
            Target::Nvptx { .. } => self.sreg("llvm.nvvm.read.ptx.sreg.tid.x"),
            Target::Host => Ok(self.const_i32(0)),
        }
    }

    /// The block's index within the grid (GPU only).
    pub fn block_index(&self) -> CodegenResult<IntValue<'ctx>> {
        self.sreg("llvm.nvvm.read.ptx.sreg.ctaid.x")
    }

    /// The number of blocks in the grid (GPU only).
    pub fn grid_size(&self) -> CodegenResult<IntValue<'ctx>> {
        self.sreg("llvm.nvvm.read.ptx.sreg.nctaid.x")
    }

    fn sreg(&self, name: &str) -> CodegenResult<IntValue<'ctx>> {
        let f = self.intrinsic(name, self.i32().fn_type(&[], false));
        let v = self.b.build_call(f, &[], "")?;
        basic(v.try_as_basic_value().basic()).map(|v| v.into_int_value())
    }

    /// Declares (once) an external function or intrinsic.
    pub fn intrinsic(&self, name: &str, ty: FunctionType<'ctx>) -> FunctionValue<'ctx> {
        self.module
            .get_function(name)
            .unwrap_or_else(|| self.module.add_function(name, ty, None))
    }

    /// The value of LLVM intrinsic `name` returning `returns`, called with `args` (whose types
    /// are its parameters').
    pub fn call_intrinsic(
        &self,
        name: &str,
        returns: BasicTypeEnum<'ctx>,
        args: &[BasicValueEnum<'ctx>],
    ) -> CodegenResult<BasicValueEnum<'ctx>> {
        let parameters: Vec<BasicMetadataTypeEnum<'ctx>> =
            args.iter().map(|arg| arg.get_type().into()).collect();
        let f = self.intrinsic(name, returns.fn_type(&parameters, false));
        let args: Vec<BasicMetadataValueEnum<'ctx>> = args.iter().map(|&arg| arg.into()).collect();
        let call = self.b.build_call(f, &args, "")?;
        basic(call.try_as_basic_value().basic())
    }

    /// Waits for every thread of the block (nothing to wait for on the host).
    pub fn barrier(&self) -> CodegenResult<()> {
        if self.target.is_gpu() {
            let f = self.intrinsic(
                "llvm.nvvm.barrier0",
                self.ctx.void_type().fn_type(&[], false),
            );
            self.b.build_call(f, &[], "")?;
        }
        Ok(())
    }

    /// Whether `predicate` (an `i1`) holds in any thread of the block, in every thread; on the
    /// GPU a barrier, so every thread must reach it.
    pub fn block_any(&self, predicate: IntValue<'ctx>) -> CodegenResult<IntValue<'ctx>> {
        if !self.target.is_gpu() {
            return Ok(predicate);
        }
        let f = self.intrinsic(
            "llvm.nvvm.barrier0.or",
            self.i32().fn_type(&[self.i32().into()], false),
        );
        let wide = self.b.build_int_z_extend(predicate, self.i32(), "")?;
        let any = self.b.build_call(f, &[wide.into()], "any")?;
        let any = basic(any.try_as_basic_value().basic())?.into_int_value();
        Ok(self
            .b
            .build_int_compare(IntPredicate::NE, any, self.const_i32(0), "")?)
    }

    /// The value of `value` held by the lane `offset` above this one (a full warp takes part).
    pub fn shfl_down_i32(
        &self,
        value: IntValue<'ctx>,
        offset: u32,
    ) -> CodegenResult<IntValue<'ctx>> {
        let i32 = self.i32();
        let f = self.intrinsic(
            "llvm.nvvm.shfl.sync.down.i32",
            i32.fn_type(&[i32.into(), i32.into(), i32.into(), i32.into()], false),
        );
        let args = [
            self.const_i32(-1).into(),
            value.into(),
            self.const_i32(i64::from(offset)).into(),
            self.const_i32(31).into(),
        ];
        let v = self.b.build_call(f, &args, "shfl")?;
        basic(v.try_as_basic_value().basic()).map(|v| v.into_int_value())
    }

    /// A per-thread array with one slot per item, allocated at function entry.
    pub fn tile_array(
        &self,
        elem: BasicTypeEnum<'ctx>,
        name: &str,
    ) -> CodegenResult<TileArray<'ctx>> {
        let len = self.tile.items_per_thread;
        let ptr = self.alloca(elem.array_type(len).into(), name)?;
        Ok(TileArray { ptr, elem, len })
    }

    /// An alloca in the function's entry block, whatever block is being built.
    pub fn alloca(&self, ty: BasicTypeEnum<'ctx>, name: &str) -> CodegenResult<PointerValue<'ctx>> {
        let entry = self.ctx.create_builder();
        match self.alloca_block.get_terminator() {
            Some(terminator) => entry.position_before(&terminator),
            None => entry.position_at_end(self.alloca_block),
        }
        Ok(entry.build_alloca(ty, name)?)
    }

    pub fn element_ptr(
        &self,
        array: TileArray<'ctx>,
        item: Item<'ctx>,
    ) -> CodegenResult<PointerValue<'ctx>> {
        let ty = array.elem.array_type(array.len);
        // SAFETY: `item.index` is below `array.len` by construction of `for_each_item`.
        Ok(unsafe {
            self.b
                .build_in_bounds_gep(ty, array.ptr, &[self.const_i32(0), item.index], "")?
        })
    }

    pub fn get(
        &self,
        array: TileArray<'ctx>,
        item: Item<'ctx>,
    ) -> CodegenResult<BasicValueEnum<'ctx>> {
        let ptr = self.element_ptr(array, item)?;
        Ok(self.b.build_load(array.elem, ptr, "")?)
    }

    pub fn set(
        &self,
        array: TileArray<'ctx>,
        item: Item<'ctx>,
        value: impl BasicValue<'ctx>,
    ) -> CodegenResult<()> {
        let ptr = self.element_ptr(array, item)?;
        self.b.build_store(ptr, value)?;
        Ok(())
    }

    /// Runs `body` once per item of the thread's tile: unrolled on the GPU, a loop on the host.
    pub fn for_each_item(
        &self,
        mut body: impl FnMut(Item<'ctx>) -> CodegenResult<()>,
    ) -> CodegenResult<()> {
        let count = self.tile.items_per_thread;
        if self.target.is_gpu() {
            for i in 0..count {
                body(Item {
                    index: self.const_i32(i64::from(i)),
                })?;
            }
            return Ok(());
        }
        let before = self.current_block()?;
        let header = self.ctx.append_basic_block(self.function, "item");
        let after = self.ctx.append_basic_block(self.function, "items_done");
        self.b.build_unconditional_branch(header)?;
        self.b.position_at_end(header);
        let index = self.b.build_phi(self.i32(), "i")?;
        index.add_incoming(&[(&self.const_i32(0), before)]);
        let index_value = index.as_basic_value().into_int_value();
        body(Item { index: index_value })?;
        let next = self
            .b
            .build_int_add(index_value, self.const_i32(1), "i_next")?;
        let latch = self.current_block()?;
        index.add_incoming(&[(&next, latch)]);
        let more = self.b.build_int_compare(
            IntPredicate::SLT,
            next,
            self.const_i32(i64::from(count)),
            "",
        )?;
        self.b.build_conditional_branch(more, header, after)?;
        self.b.position_at_end(after);
        Ok(())
    }

    /// Runs `body` for every index below `count` (an `i64`), the block's threads taking every
    /// `threads`-th one: how a block walks an array in shared memory together.
    pub fn for_each_strided(
        &self,
        count: IntValue<'ctx>,
        body: impl FnMut(IntValue<'ctx>) -> CodegenResult<()>,
    ) -> CodegenResult<()> {
        let first = self.b.build_int_z_extend(self.tid()?, self.i64(), "")?;
        let step = self.const_i64(i64::from(self.tile.threads));
        self.range_loop(first, count, step, "strided", body)
    }

    /// Runs `body` for `start, start + step, ...` while below `end` (all `i64`).
    pub fn for_range(
        &self,
        start: IntValue<'ctx>,
        end: IntValue<'ctx>,
        step: IntValue<'ctx>,
        body: impl FnMut(IntValue<'ctx>) -> CodegenResult<()>,
    ) -> CodegenResult<()> {
        self.range_loop(start, end, step, "range", body)
    }

    fn range_loop(
        &self,
        start: IntValue<'ctx>,
        end: IntValue<'ctx>,
        step: IntValue<'ctx>,
        label: &str,
        mut body: impl FnMut(IntValue<'ctx>) -> CodegenResult<()>,
    ) -> CodegenResult<()> {
        let before = self.current_block()?;
        let header = self.ctx.append_basic_block(self.function, label);
        let work = self
            .ctx
            .append_basic_block(self.function, &format!("{label}_body"));
        let done = self
            .ctx
            .append_basic_block(self.function, &format!("{label}_done"));
        self.b.build_unconditional_branch(header)?;
        self.b.position_at_end(header);
        let index = self.b.build_phi(self.i64(), &label[..1])?;
        index.add_incoming(&[(&start, before)]);
        let index_value = index.as_basic_value().into_int_value();
        let more = self
            .b
            .build_int_compare(IntPredicate::SLT, index_value, end, "")?;
        self.b.build_conditional_branch(more, work, done)?;
        self.b.position_at_end(work);
        body(index_value)?;
        let next = self.b.build_int_add(index_value, step, "")?;
        index.add_incoming(&[(&next, self.current_block()?)]);
        self.b.build_unconditional_branch(header)?;
        self.b.position_at_end(done);
        Ok(())
    }

    /// An array of `len` values of `elem` shared by the block: shared memory on the GPU, a local
    /// array on the host (where a block is one thread). `name` must be unique in the module.
    pub fn block_array(
        &self,
        elem: BasicTypeEnum<'ctx>,
        len: u32,
        name: &str,
    ) -> CodegenResult<PointerValue<'ctx>> {
        match self.target {
            Target::Nvptx { .. } => self.shared_array(name, elem, len),
            Target::Host => self.alloca(elem.array_type(len).into(), name),
        }
    }

    /// An array of `len` values of `elem` in shared memory (GPU only), declared once per module
    /// under `name`: later calls with the same name return the same array.
    pub fn shared_array(
        &self,
        name: &str,
        elem: BasicTypeEnum<'ctx>,
        len: u32,
    ) -> CodegenResult<PointerValue<'ctx>> {
        if let Some(global) = self.module.get_global(name) {
            return Ok(global.as_pointer_value());
        }
        let ty = elem.array_type(len);
        let global = self
            .module
            .add_global(ty, Some(AddressSpace::from(SHARED)), name);
        global.set_linkage(Linkage::Internal);
        global.set_initializer(&ty.get_undef());
        global.set_alignment(16);
        Ok(global.as_pointer_value())
    }

    /// Bytes of shared memory the module has declared so far (every kernel and primitive of
    /// the module shares them: one kernel per module).
    pub fn shared_bytes_declared(&self) -> u64 {
        self.module
            .get_globals()
            .filter(|g| {
                g.as_pointer_value().get_type().get_address_space() == AddressSpace::from(SHARED)
            })
            .map(|g| any_type_bytes(g.get_value_type()))
            .sum()
    }

    /// The position of `item` within the tile, `item * threads + tid` (striped).
    pub fn item_offset(&self, item: Item<'ctx>) -> CodegenResult<IntValue<'ctx>> {
        let threads = self.const_i32(i64::from(self.tile.threads));
        let scaled = self.b.build_int_nsw_mul(item.index, threads, "")?;
        if self.target.is_gpu() {
            Ok(self.b.build_int_nsw_add(scaled, self.tid()?, "offset")?)
        } else {
            Ok(scaled)
        }
    }

    /// Where this thread's first item lies in a tile of `elem`s starting at `base`. Computed
    /// once, before a loop over items: every item's address is then this register and a
    /// constant offset (`item_ptr`), which the code generator does not have to discover.
    pub fn thread_first(
        &self,
        elem: BasicTypeEnum<'ctx>,
        base: PointerValue<'ctx>,
    ) -> CodegenResult<PointerValue<'ctx>> {
        match self.target {
            Target::Nvptx { .. } => self.offset_ptr(elem, base, self.tid()?),
            Target::Host => Ok(base),
        }
    }

    /// Where `item` of this thread lies, from its first item's address (`thread_first`).
    pub fn item_ptr(
        &self,
        elem: BasicTypeEnum<'ctx>,
        first: PointerValue<'ctx>,
        item: Item<'ctx>,
    ) -> CodegenResult<PointerValue<'ctx>> {
        let threads = self.const_i32(i64::from(self.tile.threads));
        let stride = self.b.build_int_nsw_mul(item.index, threads, "")?;
        self.offset_ptr(elem, first, stride)
    }

    /// Builds `then` under `condition`; the builder continues after it.
    pub fn if_then(
        &self,
        condition: IntValue<'ctx>,
        then: impl FnOnce() -> CodegenResult<()>,
    ) -> CodegenResult<()> {
        let then_block = self.ctx.append_basic_block(self.function, "then");
        let done = self.ctx.append_basic_block(self.function, "endif");
        self.b
            .build_conditional_branch(condition, then_block, done)?;
        self.b.position_at_end(then_block);
        then()?;
        self.b.build_unconditional_branch(done)?;
        self.b.position_at_end(done);
        Ok(())
    }

    pub fn current_block(&self) -> CodegenResult<BasicBlock<'ctx>> {
        self.b
            .get_insert_block()
            .ok_or_else(|| CodegenError::Invalid("the builder is not positioned".into()))
    }

    /// A global pointer `base + index * size_of(elem)`.
    pub fn offset_ptr(
        &self,
        elem: BasicTypeEnum<'ctx>,
        base: PointerValue<'ctx>,
        index: IntValue<'ctx>,
    ) -> CodegenResult<PointerValue<'ctx>> {
        // SAFETY: callers index inside buffers sized by the executor for these indices.
        Ok(unsafe { self.b.build_in_bounds_gep(elem, base, &[index], "")? })
    }

    /// `value` as a truth value (non-zero).
    pub fn truth(&self, value: IntValue<'ctx>) -> CodegenResult<IntValue<'ctx>> {
        if value.get_type().get_bit_width() == 1 {
            return Ok(value);
        }
        Ok(self
            .b
            .build_int_compare(IntPredicate::NE, value, value.get_type().const_zero(), "")?)
    }

    /// A relaxed atomic load of the integer of type `ty` at `ptr`, aligned to its width (an
    /// atomic access the back end cannot prove aligned becomes a library call): read whole,
    /// and read again each time, as a retry loop needs.
    pub fn atomic_load(
        &self,
        ty: inkwell::types::IntType<'ctx>,
        ptr: PointerValue<'ctx>,
    ) -> CodegenResult<IntValue<'ctx>> {
        let load = self.b.build_load(ty, ptr, "")?.into_int_value();
        if let Some(instruction) = load.as_instruction_value() {
            relaxed_and_aligned(instruction, ty.get_bit_width() / 8)?;
        }
        Ok(load)
    }

    /// `*ptr = *ptr op value` atomically (relaxed), for integer and floating-point values.
    pub fn atomic_update(
        &self,
        op: inkwell::AtomicRMWBinOp,
        ptr: PointerValue<'ctx>,
        value: BasicValueEnum<'ctx>,
    ) -> CodegenResult<()> {
        use inkwell::llvm_sys::core::LLVMBuildAtomicRMW;
        use inkwell::llvm_sys::LLVMAtomicOrdering;
        use inkwell::values::AsValueRef;
        // No GPU atomic is 128 bits wide: those are built of 64-bit ones.
        if let BasicValueEnum::IntValue(wide) = value {
            if wide.get_type().get_bit_width() == 128 {
                return crate::wide_atomics::update(self, op, ptr, wide);
            }
        }
        if self.b.get_insert_block().is_none() {
            return Err(CodegenError::Invalid(
                "the builder is not positioned".into(),
            ));
        }
        // inkwell's safe wrapper accepts only integers; floating-point atomics (native fadd on
        // the GPU) go through the C API with the same operands.
        unsafe {
            LLVMBuildAtomicRMW(
                self.b.as_mut_ptr(),
                op.into(),
                ptr.as_value_ref(),
                value.as_value_ref(),
                LLVMAtomicOrdering::LLVMAtomicOrderingMonotonic,
                0,
            );
        }
        Ok(())
    }

    /// A truth value widened to the `i8` stored in flag arrays.
    pub fn flag(&self, truth: IntValue<'ctx>) -> CodegenResult<IntValue<'ctx>> {
        Ok(self
            .b
            .build_int_z_extend_or_bit_cast(truth, self.i8(), "")?)
    }
}

/// Makes a load or store atomic (relaxed) and aligned to `bytes`.
pub fn relaxed_and_aligned(
    instruction: inkwell::values::InstructionValue<'_>,
    bytes: u32,
) -> CodegenResult<()> {
    let invalid = |e: &dyn std::fmt::Display| CodegenError::Invalid(e.to_string());
    instruction.set_alignment(bytes).map_err(|e| invalid(&e))?;
    instruction
        .set_atomic_ordering(inkwell::AtomicOrdering::Monotonic)
        .map_err(|e| invalid(&e))
}

/// `value` as a constant of the integer type `ty` (64 or 128 bits; truncated to the type),
/// built from two 64-bit words, which a constant of 128 bits needs.
pub fn int_constant<'ctx>(ty: inkwell::types::IntType<'ctx>, value: i128) -> IntValue<'ctx> {
    let words = [value as u64, (value >> 64) as u64];
    ty.const_int_arbitrary_precision(&words)
}

/// The value of a call that must return one.
pub fn basic<'ctx>(value: Option<BasicValueEnum<'ctx>>) -> CodegenResult<BasicValueEnum<'ctx>> {
    value.ok_or_else(|| {
        CodegenError::Invalid("a call expected to return a value returned none".into())
    })
}

/// Bytes a value of `ty` takes in memory (the types kernels keep in arrays: integers, floats,
/// vectors and arrays of them).
pub fn byte_width(ty: BasicTypeEnum<'_>) -> u32 {
    use inkwell::types::AnyType;
    any_type_bytes(ty.as_any_type_enum()) as u32
}

fn any_type_bytes(ty: inkwell::types::AnyTypeEnum<'_>) -> u64 {
    use inkwell::types::{AnyType, AnyTypeEnum};
    match ty {
        AnyTypeEnum::IntType(t) => u64::from(t.get_bit_width()).div_ceil(8),
        AnyTypeEnum::FloatType(t) => {
            let ctx = t.get_context();
            if t == ctx.f64_type() {
                8
            } else if t == ctx.f32_type() {
                4
            } else {
                2
            }
        }
        AnyTypeEnum::ArrayType(t) => {
            u64::from(t.len()) * any_type_bytes(t.get_element_type().as_any_type_enum())
        }
        AnyTypeEnum::VectorType(t) => {
            u64::from(t.get_size()) * any_type_bytes(t.get_element_type().as_any_type_enum())
        }
        _ => 8,
    }
}
