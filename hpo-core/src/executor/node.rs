//! The GPUs a scheduler gave this node, as it says so in the environment.
//!
//! Slurm, for a job or step with `--gres=gpu:N` (or `--gpus-per-node`),
//! sets `CUDA_VISIBLE_DEVICES` to the GPUs it allocated (indices, or UUIDs
//! where the node's `gres.conf` names them so) and `SLURM_JOB_GPUS` to their
//! indices on the node. A process started by the job sees only those GPUs;
//! its worker processes are each given one of them, by the same name, so
//! that a trial never lands on a GPU another job holds.

use crate::error::{Error, Result};

/// The GPUs this node's scheduler gave the process: `CUDA_VISIBLE_DEVICES`
/// if set, else Slurm's `SLURM_JOB_GPUS`, one entry each, as a worker's
/// `CUDA_VISIBLE_DEVICES` names it. An error, saying what was read, when
/// neither names a GPU.
pub fn node_gpus() -> Result<Vec<String>> {
    gpus_from(
        std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref(),
        std::env::var("SLURM_JOB_GPUS").ok().as_deref(),
    )
}

/// [`node_gpus`] from the variables' values (`None`: unset).
pub fn gpus_from(cuda_visible: Option<&str>, slurm_job_gpus: Option<&str>) -> Result<Vec<String>> {
    let (var, list) = match (named(cuda_visible), named(slurm_job_gpus)) {
        (Some(list), _) => ("CUDA_VISIBLE_DEVICES", list),
        (None, Some(list)) => ("SLURM_JOB_GPUS", list),
        (None, None) => {
            return Err(Error::InvalidConfig(format!(
                "this node was given no GPU: CUDA_VISIBLE_DEVICES is {} and SLURM_JOB_GPUS is {}; \
                 ask the scheduler for GPUs (sbatch `--gres=gpu:N`) or set CUDA_VISIBLE_DEVICES",
                shown(cuda_visible),
                shown(slurm_job_gpus)
            )))
        }
    };
    let gpus: Vec<String> = list.split(',').map(|g| g.trim().to_owned()).collect();
    if gpus.iter().any(String::is_empty) {
        return Err(Error::InvalidConfig(format!(
            "{var}={list:?} has an empty entry; expected GPUs separated by commas, such as 0,1,2,3"
        )));
    }
    Ok(gpus)
}

/// A variable's value when it names GPUs (Slurm sets `NoDevFiles` when the
/// job asked for none).
fn named(v: Option<&str>) -> Option<&str> {
    v.map(str::trim)
        .filter(|v| !v.is_empty() && *v != "NoDevFiles")
}

fn shown(v: Option<&str>) -> String {
    v.map_or_else(|| "unset".to_owned(), |v| format!("{v:?}"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn cuda_visible_devices_wins_then_slurm_job_gpus() {
        assert_eq!(gpus_from(Some("2,3"), Some("0,1")).unwrap(), ["2", "3"]);
        assert_eq!(
            gpus_from(None, Some("0, 1,2,3")).unwrap(),
            ["0", "1", "2", "3"]
        );
        assert_eq!(
            gpus_from(Some("GPU-8f3a,GPU-77c1"), None).unwrap(),
            ["GPU-8f3a", "GPU-77c1"]
        );
        assert_eq!(gpus_from(Some("NoDevFiles"), Some("5")).unwrap(), ["5"]);
    }

    #[test]
    fn no_gpu_or_a_bad_list_is_a_clear_error() {
        let e = gpus_from(None, None).unwrap_err().to_string();
        assert!(e.contains("given no GPU") && e.contains("unset"), "{e}");
        let e = gpus_from(Some(""), Some("NoDevFiles"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"NoDevFiles\""), "{e}");
        let e = gpus_from(Some("0,,1"), None).unwrap_err().to_string();
        assert!(
            e.contains("CUDA_VISIBLE_DEVICES=\"0,,1\" has an empty entry"),
            "{e}"
        );
    }
}
