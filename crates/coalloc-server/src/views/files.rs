//! The replica catalog and transfers as the API shows them (seed 000 §2.3, §2.5).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One replica of a logical file: where it is, how big, its BLAKE3 checksum, and whether it
/// was declared in the site configuration (`static`), registered (`registered`) or made by a
/// transfer (`cached`, evictable).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "grid.dat", "site": "alpha", "path": "/data/grid.dat",
    "size": 200000000, "blake3": "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262",
    "origin": "registered"}))]
pub struct ReplicaView {
    pub name: String,
    pub site: String,
    pub path: Option<String>,
    pub size: u64,
    pub blake3: Option<String>,
    /// static, registered or cached.
    pub origin: String,
}

/// `GET /v1/files`, and what `DELETE /v1/files/{name}` removed.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"files": [{"name": "grid.dat", "site": "alpha", "path": "/data/grid.dat",
    "size": 200000000, "blake3": "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262",
    "origin": "registered"}]}))]
pub struct FileList {
    pub files: Vec<ReplicaView>,
}

/// `POST /v1/files`: register a replica. Without `size` and `blake3`, the file is read for
/// them where it is: by the server for its own sites, by the site's agent for an agent's
/// site (`coalloc file register` gives them when it can read the file itself).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"site": "alpha", "name": "grid.dat", "path": "/data/grid.dat"}))]
pub struct RegisterBody {
    pub site: String,
    pub name: String,
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blake3: Option<String>,
}

/// A transfer of a job's input file to a component's site, in `GET /v1/jobs/{id}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"transfer": 1, "component": 1, "file": "grid.dat", "from": "alpha",
    "to": "beta", "bytes": 100000000, "size": 200000000, "state": "running", "reason": null}))]
pub struct TransferView {
    pub transfer: u64,
    pub component: usize,
    pub file: String,
    pub from: String,
    pub to: String,
    /// Bytes at the destination.
    pub bytes: u64,
    pub size: u64,
    /// waiting, running, done or failed.
    pub state: String,
    #[serde(default)]
    pub reason: Option<String>,
}

/// The bandwidth model's figures from a site to another, bytes per second (seed 000 §2.6):
/// the configured one and the measured average (an EWMA of this server's transfers), which
/// the estimates use once there is one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"to": "beta", "configured": 25000000, "measured": 23100000}))]
pub struct BandwidthView {
    pub to: String,
    pub configured: Option<u64>,
    pub measured: Option<u64>,
}
