//! Matrix products by NVIDIA's cuBLAS, on cubecl's own CUDA stream.
//!
//! cubek 0.2's product kernels, even the ones hpo-burn's table picks by
//! shape, ran BERT's products at 46-100 TFLOP/s on an H200 where PyTorch
//! (cuBLAS) runs a whole training step faster than that
//! (`bench/results/gpu_check.md`). This module loads `libcublas` at run time
//! (as cubecl loads NVRTC: nothing at build time, nothing to link) and runs
//! a product as one `cublasGemmStridedBatchedEx` per run of evenly strided
//! batches, in the same arithmetic as cubecl's f32 products (TF32 tensor
//! cores, f32 accumulation) or bf16/f16 with f32 accumulation.
//!
//! Ordering: [`gemm`] asks cubecl for each tensor's device memory
//! (`ComputeClient::get_resource`, which returns once every kernel launched
//! before it is queued), and hpo's patch of cubecl-cuda
//! (`vendor/cubecl-cuda/PATCH.md`) hands back the stream those kernels run
//! on; cuBLAS is queued on that stream, so it runs after them and before
//! every kernel launched after it, as cubecl's own kernels do. Memory stays
//! cubecl's: the output is allocated by cubecl before the call.
//!
//! Measured on an H200 (2026-11-27, fourth check, one call): where the
//! device is the bottleneck it pays (BERT-base 32 x 512 trained 1.28x
//! faster than with the table, BERT-large 16 x 384 1.12x); `criteria`'s
//! small trials, three or four processes sharing the device, took 10-40 %
//! longer with it, trial for trial (one small trial alone: the same time),
//! so the path is opt-in (`HPO_CUDA_MATMUL=cublas`, [`super::matmul`]).
//! Suspects, not yet separated on a device: each `get_resource` is a
//! blocking round trip to cubecl's device thread, which first queues
//! everything launched before it, so at every product the host waits for
//! that thread instead of running ahead; `cublasSetStream` at every
//! product, which resets cuBLAS's workspace (since then called only when
//! the stream changes, not yet measured); and the machine (each call of
//! that check had a fresh one).
//!
//! Anything this path cannot do (no library found, an unsupported element
//! type or layout, a failed call) returns an error and the caller takes the
//! next kernel; the first reason is logged once per process.

#[cfg(feature = "cuda")]
pub(crate) use ffi::{gemm, gemm_ready};

/// One operand's last two dimensions as cuBLAS sees them (column-major).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Operand {
    /// Whether cuBLAS must transpose the column-major matrix it reads to
    /// get this operand's row-major-transposed view (see [`layout`]).
    pub transposed: bool,
    /// The leading dimension, in elements.
    pub ld: usize,
}

/// How cuBLAS reads a `rows x cols` row-major operand stored with strides
/// `(row_stride, col_stride)`: read column-major, a row-major matrix is its
/// own transpose with leading dimension `row_stride` (`transposed: false`);
/// a transposed view (`row_stride == 1`) is read as it is, and cuBLAS is
/// told to transpose it (`transposed: true`). `None` when neither stride is
/// 1 (the caller copies it or takes another kernel).
pub(crate) fn layout(
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
) -> Option<Operand> {
    if col_stride == 1 || cols == 1 {
        let ld = if rows == 1 { cols.max(1) } else { row_stride };
        (ld >= cols.max(1)).then_some(Operand {
            transposed: false,
            ld,
        })
    } else if row_stride == 1 || rows == 1 {
        let ld = if cols == 1 { rows.max(1) } else { col_stride };
        (ld >= rows.max(1)).then_some(Operand {
            transposed: true,
            ld,
        })
    } else {
        None
    }
}

/// The batch dimensions of the three tensors merged where all three are
/// evenly strided across them: `(count, [stride of lhs, rhs, out])` per
/// merged dimension, outermost first, size-1 dimensions dropped.
pub(crate) fn batches(shape: &[usize], strides: [&[usize]; 3]) -> Vec<(usize, [usize; 3])> {
    let mut out: Vec<(usize, [usize; 3])> = Vec::new();
    for (d, &n) in shape.iter().enumerate() {
        if n == 1 {
            continue;
        }
        let s = [strides[0][d], strides[1][d], strides[2][d]];
        if let Some(last) = out.last_mut() {
            // The outer dimension steps over the whole inner one in each.
            if (0..3).all(|i| last.1[i] == s[i] * n) {
                last.0 *= n;
                last.1 = s;
                continue;
            }
        }
        out.push((n, s));
    }
    out
}

#[cfg(feature = "cuda")]
// Calling a C library loaded at run time: every call is unsafe, each with
// its SAFETY note.
#[allow(unsafe_code)]
mod ffi {
    use super::{batches, layout};
    use burn::cubecl::cuda::CudaRuntime;
    use burn::tensor::{DType, TensorMetadata};
    use burn_cubecl::tensor::CubeTensor;
    use std::ffi::{c_int, c_longlong, c_void};
    use std::sync::OnceLock;

    type Handle = *mut c_void;
    type Status = c_int;
    type Create = unsafe extern "C" fn(*mut Handle) -> Status;
    type SetStream = unsafe extern "C" fn(Handle, *mut c_void) -> Status;
    #[allow(clippy::type_complexity)]
    type GemmStridedBatchedEx = unsafe extern "C" fn(
        Handle,
        c_int,
        c_int,
        c_int,
        c_int,
        c_int,
        *const c_void,
        *const c_void,
        c_int,
        c_int,
        c_longlong,
        *const c_void,
        c_int,
        c_int,
        c_longlong,
        *const c_void,
        *mut c_void,
        c_int,
        c_int,
        c_longlong,
        c_int,
        c_int,
        c_int,
    ) -> Status;

    // cuBLAS's and CUDA's enum values (cublas_api.h, library_types.h).
    const OP_N: c_int = 0;
    const OP_T: c_int = 1;
    const R_32F: c_int = 0;
    const R_16F: c_int = 2;
    const R_16BF: c_int = 14;
    const COMPUTE_32F: c_int = 68;
    const COMPUTE_32F_FAST_TF32: c_int = 77;
    const GEMM_DEFAULT: c_int = -1;

    /// The library and the three entry points this module calls.
    struct Library {
        create: Create,
        set_stream: SetStream,
        gemm: GemmStridedBatchedEx,
        // Kept loaded for the process's life: the pointers above point into it.
        _lib: libloading::Library,
    }

    /// The names the library goes by: the CUDA 13 and 12 sonames, then the
    /// development link.
    const NAMES: [&str; 3] = ["libcublas.so.13", "libcublas.so.12", "libcublas.so"];

    /// Where else to look when the loader's path does not have it: the CUDA
    /// toolkit (`CUDA_PATH`, `/usr/local/cuda`).
    fn candidates() -> Vec<std::path::PathBuf> {
        let mut out: Vec<std::path::PathBuf> = NAMES.iter().map(Into::into).collect();
        let mut roots = Vec::new();
        if let Some(p) = std::env::var_os("CUDA_PATH") {
            roots.push(std::path::PathBuf::from(p));
        }
        roots.push("/usr/local/cuda".into());
        for root in roots {
            for dir in ["lib64", "lib", "targets/x86_64-linux/lib"] {
                for name in NAMES {
                    out.push(root.join(dir).join(name));
                }
            }
        }
        out
    }

    fn load() -> Result<Library, String> {
        let mut tried = Vec::new();
        for path in candidates() {
            // SAFETY: loading NVIDIA's cuBLAS runs its initialisers, which do
            // not touch this process's state beyond the CUDA runtime's.
            let lib = match unsafe { libloading::Library::new(&path) } {
                Ok(lib) => lib,
                Err(e) => {
                    tried.push(format!("{}: {e}", path.display()));
                    continue;
                }
            };
            // SAFETY: the symbols' types are cuBLAS's C signatures above.
            let found = unsafe {
                (
                    lib.get::<Create>(b"cublasCreate_v2\0").map(|s| *s),
                    lib.get::<SetStream>(b"cublasSetStream_v2\0").map(|s| *s),
                    lib.get::<GemmStridedBatchedEx>(b"cublasGemmStridedBatchedEx\0")
                        .map(|s| *s),
                )
            };
            return match found {
                (Ok(create), Ok(set_stream), Ok(gemm)) => Ok(Library {
                    create,
                    set_stream,
                    gemm,
                    _lib: lib,
                }),
                _ => Err(format!("{} lacks cuBLAS's entry points", path.display())),
            };
        }
        Err(format!("libcublas not found (tried {})", tried.join("; ")))
    }

    fn library() -> Result<&'static Library, String> {
        static LIB: OnceLock<Result<Library, String>> = OnceLock::new();
        LIB.get_or_init(load).as_ref().map_err(Clone::clone)
    }

    /// Why cuBLAS cannot be loaded, if it cannot.
    pub(crate) fn gemm_ready() -> Result<(), String> {
        library().map(|_| ())
    }

    thread_local! {
        /// This thread's cuBLAS handle (one per thread, as cuBLAS advises),
        /// created at its first product; null until then or if creating failed.
        static HANDLE: std::cell::Cell<Handle> = const { std::cell::Cell::new(std::ptr::null_mut()) };
        /// The stream this thread's handle was last set to (null: none yet).
        static STREAM: std::cell::Cell<*mut c_void> = const { std::cell::Cell::new(std::ptr::null_mut()) };
    }

    fn handle(lib: &Library) -> Result<Handle, String> {
        HANDLE.with(|h| {
            if h.get().is_null() {
                let mut new = std::ptr::null_mut();
                // SAFETY: `new` is a valid out-pointer; cublasCreate initialises
                // the CUDA runtime on the current device's primary context,
                // the context cubecl-cuda retains.
                let status = unsafe { (lib.create)(&mut new) };
                if status != 0 || new.is_null() {
                    return Err(format!("cublasCreate failed (status {status})"));
                }
                h.set(new);
            }
            Ok(h.get())
        })
    }

    /// Points this thread's handle `h` at `stream`, only when it points
    /// elsewhere: `cublasSetStream` also resets cuBLAS's workspace, which a
    /// call per product need not pay.
    fn on_stream(lib: &Library, h: Handle, stream: *mut c_void) -> Result<(), String> {
        STREAM.with(|current| {
            if current.get() == stream {
                return Ok(());
            }
            // SAFETY: `h` is this thread's handle and `stream` a live stream
            // of the primary context it was created on.
            let status = unsafe { (lib.set_stream)(h, stream) };
            if status != 0 {
                current.set(std::ptr::null_mut());
                return Err(format!("cublasSetStream failed (status {status})"));
            }
            current.set(stream);
            Ok(())
        })
    }

    /// Outer batches looped over on the host past this many, the caller takes
    /// another kernel instead.
    const MAX_CALLS: usize = 1024;

    /// `out = lhs · rhs` over the last two dimensions, batched over the others
    /// (equal in all three), by cuBLAS on cubecl's stream. `out` is cubecl's
    /// freshly allocated output.
    pub(crate) fn gemm(
        lhs: &CubeTensor<CudaRuntime>,
        rhs: &CubeTensor<CudaRuntime>,
        out: &CubeTensor<CudaRuntime>,
    ) -> Result<(), String> {
        let lib = library()?;
        let (ty, compute) = match lhs.dtype {
            DType::F32 => (R_32F, COMPUTE_32F_FAST_TF32),
            DType::BF16 => (R_16BF, COMPUTE_32F),
            DType::F16 => (R_16F, COMPUTE_32F),
            other => return Err(format!("element type {other:?}")),
        };
        if rhs.dtype != lhs.dtype || out.dtype != lhs.dtype {
            return Err("mixed element types".into());
        }
        let (ls, rs, os) = (lhs.shape(), rhs.shape(), out.shape());
        let rank = ls.num_dims();
        let (ld, rd, od) = (ls.as_slice(), rs.as_slice(), os.as_slice());
        if rank < 2 || rd.len() != rank || od.len() != rank || ld[..rank - 2] != rd[..rank - 2] {
            return Err("shapes".into());
        }
        let (m, k, n) = (ld[rank - 2], ld[rank - 1], rd[rank - 1]);
        if m == 0 || n == 0 || k == 0 {
            return Err("an empty product".into());
        }
        let (lst, rst, ost) = (
            &lhs.meta.strides()[..],
            &rhs.meta.strides()[..],
            &out.meta.strides()[..],
        );
        let a = layout(m, k, lst[rank - 2], lst[rank - 1]).ok_or("lhs layout")?;
        let b = layout(k, n, rst[rank - 2], rst[rank - 1]).ok_or("rhs layout")?;
        let c = layout(m, n, ost[rank - 2], ost[rank - 1]).ok_or("out layout")?;
        if c.transposed {
            return Err("a transposed output".into());
        }
        let mut groups = batches(
            &ld[..rank - 2],
            [&lst[..rank - 2], &rst[..rank - 2], &ost[..rank - 2]],
        );
        let (count, strides) = groups.pop().unwrap_or((1, [0, 0, 0]));
        let calls: usize = groups.iter().map(|g| g.0).product();
        if calls > MAX_CALLS {
            return Err(format!("{calls} batch groups"));
        }
        let fits = |v: usize| c_int::try_from(v).map_err(|_| format!("{v} is over cuBLAS's int"));
        let (mi, ni, ki, count_i) = (fits(m)?, fits(n)?, fits(k)?, fits(count)?);
        let (lda, ldb, ldc) = (fits(a.ld)?, fits(b.ld)?, fits(c.ld)?);
        let elem = lhs.dtype.size();

        let lr = lhs
            .client
            .get_resource(lhs.handle.clone())
            .map_err(|e| format!("{e:?}"))?;
        let rr = rhs
            .client
            .get_resource(rhs.handle.clone())
            .map_err(|e| format!("{e:?}"))?;
        let or = out
            .client
            .get_resource(out.handle.clone())
            .map_err(|e| format!("{e:?}"))?;
        let stream = or.resource().stream;
        if stream.is_null() {
            return Err("cubecl-cuda without hpo's patch (no stream)".into());
        }
        let h = handle(lib)?;
        on_stream(lib, h, stream.cast())?;
        let (one, zero) = (1.0f32, 0.0f32);
        for call in 0..calls {
            // This call's offset in each tensor, in elements.
            let mut offset = [0usize; 3];
            let mut rest = call;
            for &(size, s) in groups.iter().rev() {
                let i = rest % size;
                rest /= size;
                for t in 0..3 {
                    offset[t] += i * s[t];
                }
            }
            let at = |base: u64, t: usize| (base + (offset[t] * elem) as u64) as *const c_void;
            // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: cuBLAS gets B first.
            // SAFETY: every pointer is a live cubecl allocation holding the
            // shape and strides checked above; the resources keep them
            // allocated until the call is queued, and later work on them is
            // queued after it on the same stream.
            let status = unsafe {
                (lib.gemm)(
                    h,
                    if b.transposed { OP_T } else { OP_N },
                    if a.transposed { OP_T } else { OP_N },
                    ni,
                    mi,
                    ki,
                    (&one as *const f32).cast(),
                    at(rr.resource().ptr, 1),
                    ty,
                    ldb,
                    strides[1] as c_longlong,
                    at(lr.resource().ptr, 0),
                    ty,
                    lda,
                    strides[0] as c_longlong,
                    (&zero as *const f32).cast(),
                    at(or.resource().ptr, 2).cast_mut(),
                    ty,
                    ldc,
                    strides[2] as c_longlong,
                    count_i,
                    compute,
                    GEMM_DEFAULT,
                )
            };
            if status != 0 {
                return Err(format!(
                    "cublasGemmStridedBatchedEx failed (status {status})"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_major_and_transposed_views_are_read_without_copies() {
        let read = |transposed, ld| Some(Operand { transposed, ld });
        // (rows, cols, row stride, col stride) and how cuBLAS reads it.
        let cases = [
            // A contiguous 3 x 5 matrix, and the transposed view of a 5 x 3 one.
            ((3, 5, 5, 1), read(false, 5)),
            ((3, 5, 1, 3), read(true, 3)),
            // A row of a wider matrix keeps its row stride as the leading dimension.
            ((4, 64, 768, 1), read(false, 768)),
            // One row or one column: either reading works; the leading
            // dimension is at least what cuBLAS requires.
            ((1, 7, 0, 1), read(false, 7)),
            ((7, 1, 1, 0), read(false, 1)),
            // Neither stride 1: not readable as a matrix.
            ((3, 5, 10, 2), None),
        ];
        for ((rows, cols, rs, cs), want) in cases {
            assert_eq!(
                layout(rows, cols, rs, cs),
                want,
                "{rows} x {cols} by ({rs}, {cs})"
            );
        }
    }

    #[test]
    fn batches_merge_only_where_every_tensor_steps_evenly() {
        // [b=2, h=12] contiguous in all three: one run of 24.
        let (q, k, o) = (
            [12 * 512 * 64, 512 * 64],
            [12 * 64 * 512, 64 * 512],
            [12 * 512 * 512, 512 * 512],
        );
        assert_eq!(
            batches(&[2, 12], [&q, &k, &o]),
            vec![(24, [512 * 64, 64 * 512, 512 * 512])]
        );
        // Heads split from [b, s, h, d] and swapped: h steps by d, b by
        // s·h·d, so the two stay separate (a host loop of b calls).
        let q = [512 * 12 * 64, 64];
        let k = [512 * 12 * 64, 64];
        let o = [12 * 512 * 512, 512 * 512];
        assert_eq!(
            batches(&[2, 12], [&q, &k, &o]),
            vec![
                (2, [512 * 12 * 64, 512 * 12 * 64, 12 * 512 * 512]),
                (12, [64, 64, 512 * 512])
            ]
        );
        // Size-1 dimensions vanish whatever their stride.
        assert_eq!(
            batches(&[1, 3], [&[99, 4], &[7, 4], &[0, 4]]),
            vec![(3, [4, 4, 4])]
        );
    }
}
