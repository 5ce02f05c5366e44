//! The answers of `GET /v1/jobs/{id}/output` (issue 33 item 4): the launches whose output
//! the server holds, each with the sizes of its standard output and error.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One launch of one component and the bytes of output it has written so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"component": 0, "launch": 1, "stdout": 42, "stderr": 0}))]
pub struct OutputLaunch {
    pub component: usize,
    pub launch: u64,
    /// Bytes of standard output.
    pub stdout: u64,
    /// Bytes of standard error.
    pub stderr: u64,
}

/// `GET /v1/jobs/{id}/output` without `component`: every launch with output, oldest first
/// (by component, then launch).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"job": 1, "launches": [{"component": 0, "launch": 1, "stdout": 42, "stderr": 0}]}))]
pub struct OutputList {
    pub job: u64,
    pub launches: Vec<OutputLaunch>,
}
