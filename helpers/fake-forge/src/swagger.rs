//! Forgejo's swagger 2.0 document as a conformance checker: route lookup, query parameter checks,
//! and JSON Schema validation of request and response bodies.
//!
//! The swagger marks no property as required or nullable and allows unknown properties. To catch
//! real mistakes the checks here are stricter: objects reject properties the swagger does not list,
//! requests may not send `null`, and responses may send `null` for any property (Go encodes nil
//! pointers and slices that way, and Forgejo does).
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Map, Value, json};

const SWAGGER: &str = include_str!("../forgejo-swagger.json");

/// One operation of the swagger: a method on a path template.
pub struct Operation {
    pub method: String,
    /// The path template without the base path, like `/repos/{owner}/{repo}/issues`.
    pub template: String,
    segments: Vec<Segment>,
    spec: Value,
}

enum Segment {
    Literal(String),
    Param(String),
    /// Literal text and parameters in one segment, like `{index}.{diffType}`.
    Pattern(Vec<Segment>),
}

/// A request path matched to an operation, with its path parameters.
pub struct Matched<'a> {
    pub operation: &'a Operation,
    pub params: HashMap<String, String>,
}

pub struct Swagger {
    operations: Vec<Operation>,
    responses: Map<String, Value>,
    request_definitions: Value,
    response_definitions: Value,
    validators: Mutex<HashMap<String, Arc<jsonschema::Validator>>>,
}

#[derive(Clone, Copy)]
enum Direction {
    Request,
    Response,
}

impl Swagger {
    pub fn load() -> Result<Swagger> {
        let doc: Value = serde_json::from_str(SWAGGER).context("parsing forgejo-swagger.json")?;
        let mut operations = Vec::new();
        for (template, item) in doc["paths"].as_object().context("swagger has no paths")? {
            for (method, spec) in item
                .as_object()
                .context("swagger path item is not an object")?
            {
                if method == "parameters" {
                    continue;
                }
                operations.push(Operation {
                    method: method.to_uppercase(),
                    template: template.clone(),
                    segments: parse_template(template),
                    spec: spec.clone(),
                });
            }
        }
        let definitions = doc["definitions"].clone();
        Ok(Swagger {
            operations,
            responses: doc["responses"].as_object().cloned().unwrap_or_default(),
            request_definitions: strict_definitions(&definitions, Direction::Request),
            response_definitions: strict_definitions(&definitions, Direction::Response),
            validators: Mutex::new(HashMap::new()),
        })
    }

    /// The operation for `method` on `path` (without the base path). Literal segments win over
    /// parameters, so `/issues/pinned` is not taken for `/issues/{index}`.
    pub fn route(&self, method: &str, path: &str) -> Option<Matched<'_>> {
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        self.operations
            .iter()
            .filter(|op| op.method == method && op.segments.len() == parts.len())
            .filter_map(|op| {
                let mut params = HashMap::new();
                let mut literals = 0;
                for (segment, part) in op.segments.iter().zip(&parts) {
                    match segment {
                        Segment::Literal(text) if text == part => literals += 1,
                        Segment::Literal(_) => return None,
                        Segment::Param(name) => {
                            params.insert(name.clone(), part.to_string());
                        }
                        Segment::Pattern(pieces) => {
                            params.extend(match_pattern(pieces, part)?);
                            literals += 1;
                        }
                    }
                }
                Some((
                    literals,
                    Matched {
                        operation: op,
                        params,
                    },
                ))
            })
            .max_by_key(|(literals, _)| *literals)
            .map(|(_, matched)| matched)
    }

    /// Checks the query parameters against the operation's declared ones.
    pub fn check_query(&self, op: &Operation, query: &[(String, String)]) -> Result<()> {
        for (name, value) in query {
            let declared = op
                .parameters()
                .find(|p| p["in"] == "query" && p["name"] == *name);
            let Some(declared) = declared else {
                bail!(
                    "query parameter `{name}` is not declared for {} {}",
                    op.method,
                    op.template
                );
            };
            let kind = match declared["type"].as_str() {
                Some("array") => declared["items"]["type"].as_str().unwrap_or("string"),
                other => other.unwrap_or("string"),
            };
            let well_typed = match kind {
                "integer" => value.parse::<i64>().is_ok(),
                "boolean" => value == "true" || value == "false",
                _ => true,
            };
            if !well_typed {
                bail!("query parameter `{name}={value}` is not a {kind}");
            }
            if let Some(allowed) = declared["enum"].as_array()
                && !allowed.iter().any(|a| a == value)
            {
                bail!(
                    "query parameter `{name}={value}` is not one of {}",
                    Value::from(allowed.clone())
                );
            }
        }
        Ok(())
    }

    /// Checks a request body against the operation's `in: body` parameter.
    pub fn check_request_body(&self, op: &Operation, body: Option<&Value>) -> Result<()> {
        let declared = op.parameters().find(|p| p["in"] == "body");
        match (declared, body) {
            (None, None) => Ok(()),
            (None, Some(_)) => bail!("{} {} takes no request body", op.method, op.template),
            (Some(param), None) if param["required"] == true => {
                bail!("{} {} requires a JSON request body", op.method, op.template)
            }
            (Some(_), None) => Ok(()),
            (Some(param), Some(body)) => {
                let key = format!("request {} {}", op.method, op.template);
                self.validate(&key, &param["schema"], Direction::Request, body)
                    .with_context(|| format!("request body of {} {}", op.method, op.template))
            }
        }
    }

    /// Checks a response status and body against the operation's declared responses. A 2xx status
    /// must be declared; an undeclared error status must carry an `APIError`-shaped body.
    pub fn check_response(&self, op: &Operation, status: u16, body: Option<&Value>) -> Result<()> {
        let declared = &op.spec["responses"][status.to_string()];
        let response = match declared.get("$ref").and_then(Value::as_str) {
            Some(reference) => {
                let name = reference.trim_start_matches("#/responses/");
                self.responses
                    .get(name)
                    .cloned()
                    .ok_or_else(|| anyhow!("unknown response {reference}"))?
            }
            None if declared.is_object() => declared.clone(),
            None if (200..300).contains(&status) => {
                bail!(
                    "status {status} is not declared for {} {}",
                    op.method,
                    op.template
                )
            }
            None => json!({"schema": {"$ref": "#/definitions/APIError"}}),
        };
        let key = format!("response {} {} {status}", op.method, op.template);
        match (response.get("schema"), body) {
            (None, None) => Ok(()),
            (None, Some(_)) => bail!(
                "status {status} of {} {} has no body",
                op.method,
                op.template
            ),
            (Some(_), None) => bail!(
                "status {status} of {} {} needs a body",
                op.method,
                op.template
            ),
            (Some(schema), Some(body)) => self
                .validate(&key, schema, Direction::Response, body)
                .with_context(|| format!("response {status} of {} {}", op.method, op.template)),
        }
    }

    fn validate(
        &self,
        key: &str,
        schema: &Value,
        direction: Direction,
        instance: &Value,
    ) -> Result<()> {
        let validator = self.validator(key, schema, direction)?;
        let errors: Vec<String> = validator
            .iter_errors(instance)
            .take(5)
            .map(|e| format!("at `{}`: {e}", e.instance_path()))
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            bail!("{}", errors.join("; "))
        }
    }

    /// Compiles each schema once; the compiled validators are shared between request threads.
    fn validator(
        &self,
        key: &str,
        schema: &Value,
        direction: Direction,
    ) -> Result<Arc<jsonschema::Validator>> {
        let mut cache = self.validators.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(validator) = cache.get(key) {
            return Ok(validator.clone());
        }
        let definitions = match direction {
            Direction::Request => &self.request_definitions,
            Direction::Response => &self.response_definitions,
        };
        let mut root = schema.clone();
        root["definitions"] = definitions.clone();
        let validator = jsonschema::draft4::options()
            .should_validate_formats(true)
            .build(&root)
            .map_err(|e| anyhow!("compiling the swagger schema for {key}: {e}"))?;
        let validator = Arc::new(validator);
        cache.insert(key.to_string(), validator.clone());
        Ok(validator)
    }
}

impl Operation {
    fn parameters(&self) -> impl Iterator<Item = &Value> {
        self.spec["parameters"].as_array().into_iter().flatten()
    }
}

fn parse_template(template: &str) -> Vec<Segment> {
    template
        .trim_matches('/')
        .split('/')
        .map(parse_segment)
        .collect()
}

fn parse_segment(part: &str) -> Segment {
    let mut pieces = Vec::new();
    let mut rest = part;
    while let Some(start) = rest.find('{') {
        let Some(length) = rest[start..].find('}') else {
            break;
        };
        if start > 0 {
            pieces.push(Segment::Literal(rest[..start].to_string()));
        }
        pieces.push(Segment::Param(rest[start + 1..start + length].to_string()));
        rest = &rest[start + length + 1..];
    }
    if !rest.is_empty() {
        pieces.push(Segment::Literal(rest.to_string()));
    }
    match pieces.len() {
        1 => pieces.pop().expect("one piece"),
        _ => Segment::Pattern(pieces),
    }
}

/// Matches a mixed segment: each parameter runs up to the literal that follows it.
fn match_pattern(pieces: &[Segment], mut part: &str) -> Option<Vec<(String, String)>> {
    let mut params = Vec::new();
    for (i, piece) in pieces.iter().enumerate() {
        match piece {
            Segment::Literal(text) => part = part.strip_prefix(text.as_str())?,
            Segment::Param(name) => {
                let end = match pieces.get(i + 1) {
                    Some(Segment::Literal(next)) => part.find(next.as_str())?,
                    _ => part.len(),
                };
                if end == 0 {
                    return None;
                }
                params.push((name.clone(), part[..end].to_string()));
                part = &part[end..];
            }
            Segment::Pattern(_) => return None,
        }
    }
    part.is_empty().then_some(params)
}

/// Closes every object definition that lists its properties, and in responses lets each property
/// be `null`.
fn strict_definitions(definitions: &Value, direction: Direction) -> Value {
    let mut out = definitions.clone();
    if let Some(map) = out.as_object_mut() {
        for definition in map.values_mut() {
            close_object(definition, direction);
        }
    }
    out
}

fn close_object(schema: &mut Value, direction: Direction) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    let Some(properties) = object.get_mut("properties").and_then(Value::as_object_mut) else {
        return;
    };
    for property in properties.values_mut() {
        close_object(property, direction);
        if let Some(items) = property.get_mut("items") {
            close_object(items, direction);
        }
        if let Direction::Response = direction {
            *property = json!({"anyOf": [property.take(), {"type": "null"}]});
        }
    }
    object
        .entry("additionalProperties")
        .or_insert(Value::Bool(false));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op<'a>(swagger: &'a Swagger, method: &str, path: &str) -> Matched<'a> {
        swagger.route(method, path).expect("a swagger operation")
    }

    #[test]
    fn literal_segments_win_over_parameters() {
        let swagger = Swagger::load().unwrap();
        let pinned = op(&swagger, "GET", "/repos/o/r/issues/pinned");
        assert_eq!(
            pinned.operation.template,
            "/repos/{owner}/{repo}/issues/pinned"
        );
        let issue = op(&swagger, "GET", "/repos/o/r/issues/7");
        assert_eq!(
            issue.operation.template,
            "/repos/{owner}/{repo}/issues/{index}"
        );
        assert_eq!(issue.params["index"], "7");
        let diff = op(&swagger, "GET", "/repos/o/r/pulls/7.diff");
        assert_eq!(diff.params["diffType"], "diff");
        assert!(swagger.route("GET", "/repos/o/r/nonsense").is_none());
        assert!(swagger.route("PUT", "/version").is_none());
    }

    #[test]
    fn requests_may_not_send_unknown_fields_or_nulls() {
        let swagger = Swagger::load().unwrap();
        let create = op(&swagger, "POST", "/repos/o/r/issues");
        let check = |body: Value| swagger.check_request_body(create.operation, Some(&body));
        assert!(check(json!({"title": "t", "labels": [1, 2]})).is_ok());
        assert!(check(json!({"title": "t", "label": [1]})).is_err());
        assert!(check(json!({"title": null})).is_err());
        assert!(check(json!({"title": "t", "labels": ["x"]})).is_err());
        let query = |pairs: &[(&str, &str)]| {
            let owned: Vec<(String, String)> = pairs
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect();
            swagger.check_query(op(&swagger, "GET", "/repos/o/r/issues").operation, &owned)
        };
        assert!(query(&[("state", "open"), ("type", "issues"), ("page", "2")]).is_ok());
        assert!(query(&[("state", "opened")]).is_err());
        assert!(query(&[("page", "two")]).is_err());
        assert!(query(&[("per_page", "50")]).is_err());
    }

    #[test]
    fn responses_may_send_nulls_but_not_unknown_fields_or_wrong_types() {
        let swagger = Swagger::load().unwrap();
        let get = op(&swagger, "GET", "/repos/o/r/issues/1");
        let check =
            |status: u16, body: Value| swagger.check_response(get.operation, status, Some(&body));
        assert!(
            check(
                200,
                json!({"number": 1, "milestone": null, "labels": [{"id": 1, "name": "x"}]})
            )
            .is_ok()
        );
        assert!(check(200, json!({"number": "1"})).is_err());
        assert!(check(200, json!({"labels": [{"id": 1, "colour": "fff"}]})).is_err());
        assert!(check(404, json!({"message": "no", "url": "u"})).is_ok());
        assert!(
            check(418, json!({"message": "no", "extra": 1})).is_err(),
            "undeclared errors are APIError"
        );
        assert!(
            check(201, json!({})).is_err(),
            "an undeclared success status"
        );
        let delete = op(&swagger, "DELETE", "/repos/o/r/issues/1/labels/2");
        assert!(swagger.check_response(delete.operation, 204, None).is_ok());
        assert!(
            swagger
                .check_response(delete.operation, 204, Some(&json!({})))
                .is_err()
        );
    }
}
