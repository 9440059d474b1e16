//! Reading results back from the device: a failed execution is an error,
//! never a number.
//!
//! burn's `into_scalar`, `into_data` and `to_data` panic when the backend
//! reports that something failed since the last synchronisation; on a GPU
//! the failure (typically an allocation) happened asynchronously on the
//! backend's own thread, and the reader is the first to hear of it. Every
//! value hpo-burn reads back (the training loss, the validation loss, the
//! predictions, the end-of-step synchronisation) goes through this module
//! instead, which uses burn's fallible readers (`try_into_scalar`,
//! `try_into_data`, `B::sync`) and turns their
//! [`ExecutionError`] into [`Error::Execution`], out of memory when the
//! backend's message says so ([`crate::oom::is_out_of_memory`]) and a device
//! failure otherwise. Either way the run ends with an error, so a trial never
//! completes with a metric computed from failed kernels.
//!
//! [`checked`] is the one place the classification happens; the readers
//! are thin wrappers around it.

use crate::error::{Error, Result};
use crate::oom::is_out_of_memory;
use burn::tensor::backend::{Backend, ExecutionError};
use burn::tensor::cast::ToElement;
use burn::tensor::{BasicOps, Element, Tensor, TensorData};

/// Turns the outcome of a fallible read of `reading` (for example "the
/// training loss") into this crate's result.
pub fn checked<T>(reading: &'static str, result: Result<T, ExecutionError>) -> Result<T> {
    result.map_err(|source| Error::Execution {
        reading,
        out_of_memory: is_out_of_memory(&source.to_string()),
        source,
    })
}

/// The data of `tensor`, or the execution error that stands in its way.
pub fn data<B: Backend, const D: usize, K: BasicOps<B>>(
    reading: &'static str,
    tensor: Tensor<B, D, K>,
) -> Result<TensorData> {
    checked(reading, tensor.try_into_data())
}

/// The values of `tensor`, converted to `E`.
pub fn values<E: Element, B: Backend, const D: usize, K: BasicOps<B>>(
    reading: &'static str,
    tensor: Tensor<B, D, K>,
) -> Result<Vec<E>> {
    data(reading, tensor)?
        .convert::<E>()
        .to_vec::<E>()
        .map_err(|source| Error::TensorData { reading, source })
}

/// The value of a one-element float tensor (a loss), as `f64`.
pub fn scalar<B: Backend, const D: usize>(
    reading: &'static str,
    tensor: Tensor<B, D>,
) -> Result<f64> {
    checked(reading, tensor.try_into_scalar()).map(|v| v.to_f64())
}

/// Waits for the work queued on `device` and reports what failed meanwhile.
pub fn sync<B: Backend>(reading: &'static str, device: &B::Device) -> Result<()> {
    checked(reading, B::sync(device))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CpuInference;

    fn failed(reason: &str) -> Result<f64, ExecutionError> {
        Err(ExecutionError::WithContext {
            reason: reason.to_owned(),
        })
    }

    #[test]
    fn an_execution_error_is_an_error_never_a_value() {
        // What cubecl reports after its stream thread failed to allocate.
        let e = checked(
            "the training loss",
            failed("can't allocate buffer of size 1073741824"),
        )
        .unwrap_err();
        assert!(
            matches!(
                e,
                Error::Execution {
                    out_of_memory: true,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e
            .to_string()
            .starts_with("out of memory while reading the training loss"));
        // The backend's error stays attached as the source, and `?` in an
        // objective keeps the whole chain in the trial's reason.
        let source = std::error::Error::source(&e).map(ToString::to_string);
        assert!(source.is_some_and(|s| s.contains("can't allocate buffer")));
        let trial = hpo_core::TrialError::from(e);
        assert!(
            matches!(&trial, hpo_core::TrialError::Failed(m) if m.contains("can't allocate buffer")),
            "{trial:?}"
        );

        let e = checked("the predictions", failed("Memory page 0 doesn't exist")).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Execution {
                    out_of_memory: false,
                    reading: "the predictions",
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().starts_with("device failure"), "{e}");
        assert_eq!(checked("x", Ok::<_, ExecutionError>(0.5)).unwrap(), 0.5);
    }

    #[test]
    fn readers_return_the_values_on_a_working_backend() {
        type B = CpuInference;
        let device = Default::default();
        let t = Tensor::<B, 1>::from_floats([1.5, -2.0], &device);
        assert_eq!(scalar("a sum", t.clone().sum()).unwrap(), -0.5);
        assert_eq!(
            values::<i64, B, 1, _>("argmax", t.argmax(0)).unwrap(),
            vec![0]
        );
        sync::<B>("a sync", &device).unwrap();
    }
}
