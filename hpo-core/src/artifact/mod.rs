//! Artifacts: files a trial stores next to the study (a model's weights,
//! predictions), fetched after the study from any process.
//!
//! Trials often run in worker processes whose memory dies with them, so
//! what a trial produces must outlive it on disk and be found from the
//! study alone. An [`ArtifactStore`] is a flat folder, as Optuna's
//! `FileSystemArtifactStore`: each artifact is the file
//! `<root>/<artifact_id>`, and the trial registers it in its system
//! attributes under `artifacts:<artifact_id>` with Optuna's exact value
//! ([`ArtifactMeta`]), so optuna-dashboard shows hpo's files and hpo reads
//! files Optuna uploaded.
//!
//! * **Where.** [`ArtifactStore::beside`] a SQLite study file
//!   (`criteria.db` -> `criteria.db.artifacts/`); for PostgreSQL (many
//!   machines) give a folder every machine mounts ([`ArtifactStore::open`],
//!   [`ArtifactStore::from_location`]).
//! * **Whole or not at all.** An upload is written to a temporary file,
//!   synced and renamed, and only then registered; a failed registration
//!   removes the file. A trial never points at half a file.
//! * **Untrusted on the way back.** Ids read from attributes must be plain
//!   file names, so a lookup never leaves the store.
//! * **Cleanup is the user's policy.** [`ArtifactStore::clean`] keeps what
//!   [`KeepArtifacts`] says (every trial, the finished ones, the best k,
//!   the Pareto front); [`ArtifactStore::sweep_orphans`] removes files a
//!   crash left unregistered.

mod atomic;
mod clean;
mod id;
mod meta;
mod store;

pub use self::clean::{CleanReport, KeepArtifacts, DEFAULT_ORPHAN_GRACE};
pub use self::meta::{ArtifactMeta, ARTIFACTS_ATTR_PREFIX, DEFAULT_MIME_TYPE};
pub use self::store::{ArtifactStore, BESIDE_SUFFIX};
