//! The GP's numeric kernels compiled for the widest vector unit the CPU has.
//!
//! The crate is built for the baseline of its target (on x86-64, SSE2: two
//! doubles per instruction). The triangular solves that dominate a proposal
//! (the posterior variance at thousands of points) run several times faster
//! with AVX2 or AVX-512, which nearly every x86-64 machine of the last ten
//! years has. [`dispatched!`] compiles a kernel a second and third time with
//! those features enabled and picks, at each call, the widest the CPU
//! reports (`is_x86_feature_detected!`, a cached load).
//!
//! **The results are the same bit for bit on every path.** Rust never fuses
//! a multiplication and an addition unless asked (`mul_add`), nor reorders
//! floating-point sums, so a wider unit computes each sum in the order the
//! source writes it: these kernels give a machine with AVX-512 the same
//! results as one without, and a resumed study continues exactly. The
//! kernel's exponential is [`exp`](super::exp), plain arithmetic, so this
//! holds for it too (the C library's picks its own code by CPU). The tests
//! of `linalg`, `kernel` and `model` check each kernel against its baseline
//! build or against the one-pair definition.

/// Defines `fn $name(args) -> R` calling the `#[inline(always)]` kernel
/// `$kernel(args)`, compiled with AVX-512F, with AVX2, or for the baseline,
/// whichever is the widest the CPU has.
macro_rules! dispatched {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? => $kernel:path) => {
        $(#[$meta])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f")]
                fn avx512($($arg: $ty),*) $(-> $ret)? {
                    $kernel($($arg),*)
                }
                #[target_feature(enable = "avx2")]
                fn avx2($($arg: $ty),*) $(-> $ret)? {
                    $kernel($($arg),*)
                }
                if std::arch::is_x86_feature_detected!("avx512f") {
                    // SAFETY: `avx512` needs AVX-512F, which the CPU has
                    // (checked on the line above).
                    #[allow(unsafe_code)]
                    return unsafe { avx512($($arg),*) };
                }
                if std::arch::is_x86_feature_detected!("avx2") {
                    // SAFETY: `avx2` needs AVX2, which the CPU has (checked
                    // on the line above).
                    #[allow(unsafe_code)]
                    return unsafe { avx2($($arg),*) };
                }
            }
            $kernel($($arg),*)
        }
    };
}

pub(super) use dispatched;
