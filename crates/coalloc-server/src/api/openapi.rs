//! The OpenAPI 3.1 document of the HTTP API, served at `/openapi.json`.

use axum::Json;
use serde_json::{json, Value};

fn op(summary: &str, auth: &str, ok: &str) -> Value {
    json!({
        "summary": summary,
        "security": [{ auth: [] }],
        "responses": {
            ok: { "description": "success" },
            "400": { "$ref": "#/components/responses/Error" },
            "401": { "$ref": "#/components/responses/Error" },
            "403": { "$ref": "#/components/responses/Error" },
            "404": { "$ref": "#/components/responses/Error" },
        }
    })
}

/// The document.
pub fn spec() -> Value {
    let id =
        json!({ "name": "id", "in": "path", "required": true, "schema": { "type": "integer" } });
    let key =
        json!({ "name": "key", "in": "path", "required": true, "schema": { "type": "string" } });
    let mut submit = op(
        "Submit a job (RSL, unordered RSL, TOML or JSON body)",
        "token",
        "201",
    );
    submit["parameters"] = json!([{ "name": "format", "in": "query",
        "schema": { "type": "string", "enum": ["rsl", "uno", "toml", "json"] } }]);
    submit["requestBody"] = json!({ "required": true, "content": {
        "application/json": { "schema": { "type": "object" } },
        "application/toml": { "schema": { "type": "string" } },
        "text/x-rsl": { "schema": { "type": "string" } } } });
    let with = |mut o: Value, params: Vec<&Value>| {
        o["parameters"] = json!(params);
        o
    };
    json!({
        "openapi": "3.1.0",
        "info": { "title": "coalloc", "version": env!("CARGO_PKG_VERSION"),
            "description": "Co-allocating meta-scheduler: jobs of components started together on several sites behind a start barrier." },
        "components": {
            "securitySchemes": {
                "token": { "type": "http", "scheme": "bearer", "description": "the server's token (state directory, file `token`)" },
                "secret": { "type": "http", "scheme": "bearer", "description": "the job's secret (COALLOC_SECRET) or the server's token" }
            },
            "responses": { "Error": { "description": "refused", "content": { "application/json": {
                "schema": { "type": "object", "properties": { "error": { "type": "string" } }, "required": ["error"] } } } } }
        },
        "paths": {
            "/v1/health": { "get": { "summary": "Liveness", "responses": { "200": { "description": "ok" } } } },
            "/v1/jobs": { "post": submit, "get": op("List jobs", "token", "200") },
            "/v1/jobs/{id}": {
                "get": with(op("Show a job", "token", "200"), vec![&id]),
                "delete": with(op("Cancel a job", "token", "200"), vec![&id]) },
            "/v1/jobs/{id}/edit": { "post": with(op("Edit a job before commit: {op: add|delete|substitute, index, component}", "token", "200"), vec![&id]) },
            "/v1/jobs/{id}/barrier": { "post": with(op("Barrier check-in {launch, local_rank, ok, reason}: held until released, aborted or the hold runs out (state: released|aborted|waiting)", "secret", "200"), vec![&id]) },
            "/v1/jobs/{id}/kv/{key}": {
                "put": with(op("Put a rendezvous value (raw body)", "secret", "204"), vec![&id, &key]),
                "get": with(op("Get a rendezvous value; ?wait_ms=N waits for it", "secret", "200"), vec![&id, &key]) },
            "/v1/sites": { "get": op("Sites with state and load", "token", "200") },
            "/v1/sites/{name}/usable": { "put": op("Mark a site usable or unusable: {usable: bool}", "token", "200") },
            "/v1/events": { "get": op("Server-sent events: job, component and site state changes", "token", "200") },
        }
    })
}

pub async fn document() -> Json<Value> {
    Json(spec())
}
