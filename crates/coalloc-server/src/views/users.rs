//! The API's types for users (issue 20 item 6): the admin issues a token to a user, lists
//! them and takes a token back.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `POST /v1/users`: a new user, and whether they are an admin.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "alice", "admin": false}))]
pub struct UserBody {
    pub name: String,
    #[serde(default)]
    pub admin: bool,
    /// How long the token is valid from now: seconds, or a duration such as "30d", "12h",
    /// "1h30m". Never expires when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_in: Option<String>,
}

/// A user (their token is never shown again after it is issued).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "alice", "admin": false}))]
pub struct UserView {
    pub name: String,
    pub admin: bool,
    /// When the token expires (milliseconds since the Unix epoch); absent: never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<i64>,
}

/// The answer to `POST /v1/users`: the user's token, shown this once.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "alice", "admin": false,
    "token": "3f0c9a1be0d14a5c8e2f7b6a9d4c3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d"}))]
pub struct UserIssued {
    pub name: String,
    pub admin: bool,
    pub token: String,
    /// When the token expires (milliseconds since the Unix epoch); absent: never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<i64>,
}

/// `GET /v1/users`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"users": [{"name": "alice", "admin": false}]}))]
pub struct UserList {
    pub users: Vec<UserView>,
}

/// `DELETE /v1/users/{name}`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "alice", "removed": true}))]
pub struct UserRemoved {
    pub name: String,
    pub removed: bool,
}
