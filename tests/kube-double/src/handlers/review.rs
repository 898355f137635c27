//! SubjectAccessReview: an RBAC decision as the API answers it.

use super::*;

/// SubjectAccessReview and SelfSubjectAccessReview: answered from RBAC, never stored.
pub(super) fn access_review(shared: &Shared, r: &ResourceRequest, call: &Call) -> Result<Reply, ApiError> {
    let rt = &shared.registry.types[r.t];
    let mut review = parse_body(call)?;
    check_type(rt, &r.version, &mut review)?;
    let spec = review.get("spec").cloned().unwrap_or(json!({}));
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let (user, mut groups) = if rt.special == Special::SelfSubjectAccessReview {
        (call.identity.user.clone(), call.identity.groups.clone())
    } else {
        let groups = spec
            .get("groups")
            .and_then(Value::as_array)
            .map(|g| g.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default();
        (text(&spec, "user"), groups)
    };
    if user.is_empty() && rt.special == Special::SubjectAccessReview && groups.is_empty() {
        return Err(ApiError::invalid(
            &rt.group,
            &rt.kind,
            "",
            vec![Cause {
                reason: "FieldValueInvalid".into(),
                message: "Invalid value: \"\": at least one of user or group must be specified".into(),
                field: "spec.user".into(),
            }],
        ));
    }
    for g in rbac::implied_groups(&user) {
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    let attributes = if let Some(ra) = spec.get("resourceAttributes") {
        rbac::Attributes {
            verb: text(ra, "verb"),
            group: text(ra, "group"),
            resource: text(ra, "resource"),
            subresource: text(ra, "subresource"),
            namespace: text(ra, "namespace"),
            name: text(ra, "name"),
            path: None,
        }
    } else if let Some(na) = spec.get("nonResourceAttributes") {
        rbac::Attributes {
            verb: text(na, "verb"),
            path: Some(text(na, "path")),
            ..Default::default()
        }
    } else {
        return Err(ApiError::invalid(&rt.group, &rt.kind, "", vec![Cause {
            reason: "FieldValueRequired".into(),
            message: "Required value: exactly one of nonResourceAttributes or resourceAttributes must be specified".into(),
            field: "spec.resourceAttributes".into(),
        }]));
    };
    let decision = if shared.rbac {
        rbac::authorize(&lock(&shared.store), &user, &groups, &attributes)
    } else {
        Ok("RBAC is off".to_string())
    };
    review["status"] = match decision {
        Ok(reason) => json!({"allowed": true, "reason": reason}),
        Err(_) => json!({"allowed": false}),
    };
    review["metadata"]["creationTimestamp"] = Value::Null;
    Ok(Reply::json(201, &review))
}
