//! The checker: resolves every name and call of a parsed expression against OCM's environment,
//! types it the way cel-go's checker does (so what cel-go refuses fails to compile here too),
//! and plans it into a [`Node`] tree the evaluator runs without looking anything up by name.

use super::library::strings::{check_verb_type, format_string, parse_format, verbs};
use super::library::{self, Overload, regex, standard};
use super::node::{ItemPredicate, Macro, Node, RegexOp};
use super::syntax::{BinaryOp, Expr, Literal};
use super::types::{Bindings, Type, assignable};
use super::value::{Key, Value};
use std::sync::Arc;

/// A compile error with its kind: `compilation failed` (checker) or `instantiation failed`
/// (what cel-go only finds when it builds the program, such as a bad constant regex).
pub enum CompileError {
    Check(String),
    Instantiate(String),
}

type Checked = Result<(Node, Type), CompileError>;

fn check_err(msg: String) -> CompileError {
    CompileError::Check(msg)
}

fn undeclared(name: &str) -> CompileError {
    check_err(format!("undeclared reference to '{name}' (in container '')"))
}

/// The declared variable and its type.
const ROOT: &str = "managedCluster";

fn root_type() -> Type {
    Type::map(Type::String, Type::Dyn)
}

pub struct Checker {
    /// Comprehension variables in scope, innermost last; a variable's slot is its index.
    scope: Vec<(String, Type)>,
    /// Whether a comprehension's body has been entered: from then on, to the end of the
    /// expression, OCM's cel-go checker accepts ordering comparisons across int, uint and double
    /// (`[1].exists(k, k < 1.5)`, `[1].all(k, true) || 1 < 1.5`), which it refuses before
    /// (`1 < 1.5`, `[1 < 1.5].exists(k, k)`). Recorded in `scheduler-core/tests/cel_vectors.tsv`.
    cross_type_ordering: bool,
}

impl Checker {
    pub fn new() -> Self {
        Self {
            scope: Vec::new(),
            cross_type_ordering: false,
        }
    }

    pub fn check(&mut self, e: &Expr) -> Checked {
        match e {
            Expr::Literal(l) => Ok(literal(l)),
            Expr::Ident(name) => self.ident(name),
            Expr::Select(target, field) => {
                if let Some(t) = self.qualified_name(e).and_then(|n| standard::type_identifier(&n)) {
                    return Ok(type_constant(t));
                }
                let (t, tt) = self.check(target)?;
                let result = select_type(&tt, false)?;
                Ok((extend_root_path(t, field_key(field), false), result))
            }
            Expr::OptSelect(target, field) => {
                let (t, tt) = self.check(target)?;
                let result = select_type(&tt, true)?;
                Ok((
                    Node::Select {
                        target: Box::new(t),
                        field: field_key(field),
                        optional: true,
                    },
                    result,
                ))
            }
            Expr::Index(target, index) => self.index(target, index, false),
            Expr::OptIndex(target, index) => self.index(target, index, true),
            Expr::List(items) => {
                let mut nodes = Vec::with_capacity(items.len());
                let mut elem: Option<Type> = None;
                for (item, optional) in items {
                    let (n, t) = self.check(item)?;
                    let t = optional_element(*optional, t)?;
                    elem = Some(elem.map_or(t.clone(), |e| Type::join(&e, &t)));
                    nodes.push((n, *optional));
                }
                Ok((Node::List(nodes), Type::list(elem.unwrap_or(Type::Dyn))))
            }
            Expr::Map(entries) => {
                let mut nodes = Vec::with_capacity(entries.len());
                let (mut kt, mut vt): (Option<Type>, Option<Type>) = (None, None);
                for (k, v, optional) in entries {
                    let (kn, ktype) = self.check(k)?;
                    if !matches!(
                        ktype,
                        Type::Dyn | Type::Bool | Type::Int | Type::Uint | Type::String
                    ) {
                        return Err(check_err(format!("unsupported map key type: {ktype}")));
                    }
                    let (vn, vtype) = self.check(v)?;
                    let vtype = optional_element(*optional, vtype)?;
                    kt = Some(kt.map_or(ktype.clone(), |e| Type::join(&e, &ktype)));
                    vt = Some(vt.map_or(vtype.clone(), |e| Type::join(&e, &vtype)));
                    nodes.push((kn, vn, *optional));
                }
                Ok((
                    Node::Map(nodes),
                    Type::map(kt.unwrap_or(Type::Dyn), vt.unwrap_or(Type::Dyn)),
                ))
            }
            Expr::Not(inner) => {
                let (n, t) = self.check(inner)?;
                let (_, result) = resolve("!_", false, &[t])?;
                Ok((Node::Not(Box::new(n)), result))
            }
            Expr::Neg(inner) => {
                let (n, t) = self.check(inner)?;
                let (_, result) = resolve("-_", false, &[t])?;
                Ok((Node::Neg(Box::new(n)), result))
            }
            Expr::Binary(op, l, r) => {
                let (ln, lt) = self.check(l)?;
                let (rn, rt) = self.check(r)?;
                let name = match op {
                    BinaryOp::Or => "_||_",
                    BinaryOp::And => "_&&_",
                    BinaryOp::Eq => "_==_",
                    BinaryOp::Ne => "_!=_",
                    BinaryOp::Lt => "_<_",
                    BinaryOp::Le => "_<=_",
                    BinaryOp::Gt => "_>_",
                    BinaryOp::Ge => "_>=_",
                    BinaryOp::In => "@in",
                    BinaryOp::Add => "_+_",
                    BinaryOp::Sub => "_-_",
                    BinaryOp::Mul => "_*_",
                    BinaryOp::Div => "_/_",
                    BinaryOp::Rem => "_%_",
                };
                let numeric = |t: &Type| matches!(t, Type::Int | Type::Uint | Type::Double);
                let ordering = matches!(op, BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge);
                let result = if self.cross_type_ordering && ordering && numeric(&lt) && numeric(&rt) {
                    Type::Bool
                } else {
                    resolve(name, false, &[lt, rt])?.1
                };
                let (l, r) = (Box::new(ln), Box::new(rn));
                let node = match op {
                    BinaryOp::And => Node::And(l, r),
                    BinaryOp::Or => Node::Or(l, r),
                    _ => Node::Binary(*op, l, r),
                };
                Ok((node, result))
            }
            Expr::Conditional(c, t, f) => {
                let (cn, ct) = self.check(c)?;
                let (tn, tt) = self.check(t)?;
                let (fnode, ft) = self.check(f)?;
                let (_, result) = resolve("_?_:_", false, &[ct, tt, ft])?;
                Ok((Node::Cond(Box::new(cn), Box::new(tn), Box::new(fnode)), result))
            }
            Expr::Call(name, args) => self.call(name, args),
            Expr::Method(target, name, args) => self.method(target, name, args),
        }
    }

    fn ident(&self, name: &str) -> Checked {
        if let Some(slot) = self.scope.iter().rposition(|(n, _)| n == name) {
            return Ok((Node::Local(slot), self.scope[slot].1.clone()));
        }
        if name == ROOT {
            return Ok((Node::Root, root_type()));
        }
        if let Some(t) = standard::type_identifier(name) {
            return Ok(type_constant(t));
        }
        Err(undeclared(name))
    }

    /// `a.b.c` as one dotted name, when its root is not a variable in scope.
    fn qualified_name(&self, e: &Expr) -> Option<String> {
        match e {
            Expr::Ident(name) => {
                let shadowed = name == ROOT || self.scope.iter().any(|(n, _)| n == name);
                (!shadowed).then(|| name.clone())
            }
            Expr::Select(target, field) => self.qualified_name(target).map(|q| format!("{q}.{field}")),
            _ => None,
        }
    }

    fn index(&mut self, target: &Expr, index: &Expr, optional: bool) -> Checked {
        let (tn, tt) = self.check(target)?;
        let (inn, it) = self.check(index)?;
        let (inner, wrapped) = match tt {
            Type::Optional(inner) => (*inner, true),
            other => (other, false),
        };
        let (_, elem) = resolve("_[_]", false, &[inner, it])?;
        let result = if optional || wrapped {
            Type::optional(elem)
        } else {
            elem
        };
        if !optional
            && let Node::Const(Value::String(key)) = &inn
            && matches!(tn, Node::Root | Node::RootPath(_))
        {
            return Ok((extend_root_path(tn, Key::String(key.clone()), true), result));
        }
        Ok((
            Node::Index {
                target: Box::new(tn),
                index: Box::new(inn),
                optional,
            },
            result,
        ))
    }

    fn args(&mut self, args: &[Expr]) -> Result<(Vec<Node>, Vec<Type>), CompileError> {
        let mut nodes = Vec::with_capacity(args.len());
        let mut types = Vec::with_capacity(args.len());
        for a in args {
            let (n, t) = self.check(a)?;
            nodes.push(n);
            types.push(t);
        }
        Ok((nodes, types))
    }

    fn call(&mut self, name: &str, args: &[Expr]) -> Checked {
        if name == "has" {
            let [Expr::Select(target, field)] = args else {
                return Err(check_err("invalid argument to has() macro".into()));
            };
            let (t, tt) = self.check(target)?;
            select_type(&tt, false)?;
            return Ok((
                Node::Has {
                    target: Box::new(t),
                    field: field_key(field),
                },
                Type::Bool,
            ));
        }
        if library::library().function(name).is_none() {
            return Err(undeclared(name));
        }
        let (nodes, types) = self.args(args)?;
        if name == "matches"
            && let Some(node) = constant_regex(RegexOp::Matches, &nodes, 1)?
        {
            return Ok((node, Type::Bool));
        }
        let (overloads, result) = resolve(name, false, &types)?;
        Ok((call_node(name, overloads, nodes), result))
    }

    fn method(&mut self, target: &Expr, name: &str, args: &[Expr]) -> Checked {
        if let Some(kind) = Macro::of(name, args.len()) {
            return self.comprehension(kind, target, args);
        }
        // `optional.of(x)`, `strings.quote(s)`, ...: a namespaced global function.
        if let Some(q) = self.qualified_name(target) {
            let qualified = format!("{q}.{name}");
            if library::library().function(&qualified).is_some() {
                let (nodes, types) = self.args(args)?;
                let (overloads, result) = resolve(&qualified, false, &types)?;
                return Ok((call_node(&qualified, overloads, nodes), result));
            }
        }
        let (tn, tt) = self.check(target)?;
        if name == "scores" {
            let (mut nodes, types) = self.args(args)?;
            let ([arg], [at]) = (nodes.as_mut_slice(), types.as_slice()) else {
                return Err(no_matching("scores", true, &[&[tt], types.as_slice()].concat()));
            };
            if !assignable(&Type::String, at, &mut Bindings::default()) {
                return Err(no_matching("scores", true, &[tt, at.clone()]));
            }
            let arg = std::mem::replace(arg, Node::Const(Value::Null));
            return Ok((
                Node::Scores {
                    target: Box::new(tn),
                    resource: Box::new(arg),
                },
                Type::list(Type::Dyn),
            ));
        }
        if library::library().function(name).is_none() {
            return Err(undeclared(name));
        }
        let (mut nodes, mut types) = self.args(args)?;
        nodes.insert(0, tn);
        types.insert(0, tt);
        let regex_op = match (name, nodes.len()) {
            ("matches", 2) => Some(RegexOp::Matches),
            ("find", 2) => Some(RegexOp::Find),
            ("findAll", 2 | 3) => Some(RegexOp::FindAll),
            _ => None,
        };
        let (overloads, result) = resolve(name, true, &types)?;
        if let Some(op) = regex_op
            && let Some(node) = constant_regex(op, &nodes, 1)?
        {
            return Ok((node, result));
        }
        if name == "format" {
            if let (Some(f), [Expr::List(items)]) = (nodes.first().and_then(string_constant), args) {
                let f = f.to_string();
                self.check_format_types(&f, items)?;
            }
            check_constant_format(&nodes)?;
        }
        if matches!(name, "or" | "orValue") && matches!(types[0], Type::Optional(_) | Type::Dyn) {
            let mut it = nodes.into_iter();
            if let (Some(receiver), Some(alternative)) = (it.next(), it.next()) {
                return Ok((
                    Node::OptOr {
                        receiver: Box::new(receiver),
                        alternative: Box::new(alternative),
                        unwrap: name == "orValue",
                    },
                    result,
                ));
            }
            return Err(check_err(format!("invalid arguments to {name}()")));
        }
        Ok((call_node(name, overloads, nodes), result))
    }

    /// cel-go checks a literal format string against the static types of a literal argument
    /// list: their number, and what each clause accepts.
    fn check_format_types(&mut self, f: &str, items: &[(Expr, bool)]) -> Result<(), CompileError> {
        if items.iter().any(|(_, optional)| *optional) {
            return Ok(());
        }
        let verbs = verbs(&parse_format(f).map_err(check_err)?);
        if items.len() < verbs.len() {
            return Err(check_err(format!("index {} out of range", items.len())));
        }
        if items.len() > verbs.len() {
            return Err(check_err(format!(
                "too many arguments supplied to string.format (expected {}, got {})",
                verbs.len(),
                items.len()
            )));
        }
        for (verb, (item, _)) in verbs.iter().zip(items) {
            let (_, t) = self.check(item)?;
            check_verb_type(*verb, &t).map_err(|e| check_err(format!("error during formatting: {e}")))?;
        }
        Ok(())
    }

    fn comprehension(&mut self, kind: Macro, target: &Expr, args: &[Expr]) -> Checked {
        let (range, rt) = self.check(target)?;
        let Expr::Ident(var) = &args[0] else {
            return Err(check_err("argument must be a simple name".into()));
        };
        let var_type = match (&kind, &rt) {
            (Macro::OptMap | Macro::OptFlatMap, Type::Optional(t)) => (**t).clone(),
            (Macro::OptMap | Macro::OptFlatMap, Type::Dyn) => Type::Dyn,
            (Macro::OptMap | Macro::OptFlatMap, other) => {
                return Err(check_err(format!(
                    "found no matching overload for 'hasValue' applied to '{other}.()'"
                )));
            }
            (_, Type::List(t)) => (**t).clone(),
            (_, Type::Map(k, _)) => (**k).clone(),
            (_, Type::Dyn) => Type::Dyn,
            (_, other) => {
                return Err(check_err(format!(
                    "expression of type '{other}' cannot be range of a comprehension (must be list, map, or dynamic)"
                )));
            }
        };
        let slot = self.scope.len();
        self.scope.push((var.clone(), var_type.clone()));
        self.cross_type_ordering = true;
        let body = args[1..]
            .iter()
            .map(|a| self.check(a))
            .collect::<Result<Vec<_>, _>>();
        self.scope.pop();
        let body = body?;
        let expect_bool = |t: &Type| -> Result<(), CompileError> {
            if matches!(t, Type::Bool | Type::Dyn) {
                Ok(())
            } else {
                Err(check_err(format!("expected type 'bool' but found '{t}'")))
            }
        };
        let result = match kind {
            Macro::All | Macro::Exists => {
                expect_bool(&body[0].1)?;
                Type::Bool
            }
            Macro::ExistsOne => {
                if !matches!(body[0].1, Type::Bool | Type::Dyn) {
                    let t = &body[0].1;
                    return Err(check_err(format!(
                        "found no matching overload for '_?_:_' applied to '({t}, int, int)'"
                    )));
                }
                Type::Bool
            }
            Macro::Filter => {
                expect_bool(&body[0].1)?;
                Type::list(var_type)
            }
            Macro::Map => {
                if body.len() == 2 {
                    expect_bool(&body[0].1)?;
                }
                Type::list(body[body.len() - 1].1.clone())
            }
            Macro::OptMap => Type::optional(body[0].1.clone()),
            Macro::OptFlatMap => match &body[0].1 {
                Type::Optional(_) | Type::Dyn => body[0].1.clone(),
                other => {
                    return Err(check_err(format!(
                        "found no matching overload for '_?_:_' applied to '(bool, {other}, optional_type(dyn))'"
                    )));
                }
            },
        };
        let body: Vec<Node> = body.into_iter().map(|(n, _)| n).collect();
        let item_body = ItemPredicate::plan(kind, &range, slot, &body).map(Box::new);
        Ok((
            Node::Comprehension {
                kind,
                range: Box::new(range),
                slot,
                body,
                item_body,
            },
            result,
        ))
    }
}

/// The type an element contributes to its list or map literal; an element written `?e` must be
/// an optional (or `dyn`).
fn optional_element(optional: bool, t: Type) -> Result<Type, CompileError> {
    match (optional, t) {
        (true, Type::Optional(inner)) => Ok(*inner),
        (true, Type::Dyn) => Ok(Type::Dyn),
        (true, other) => Err(check_err(format!(
            "expected type 'optional_type(dyn)' but found '{other}'"
        ))),
        (false, t) => Ok(t),
    }
}

fn literal(l: &Literal) -> (Node, Type) {
    let (v, t) = match l {
        Literal::Null => (Value::Null, Type::Null),
        Literal::Bool(b) => (Value::Bool(*b), Type::Bool),
        Literal::Int(i) => (Value::Int(*i), Type::Int),
        Literal::Uint(u) => (Value::Uint(*u), Type::Uint),
        Literal::Double(d) => (Value::Double(*d), Type::Double),
        Literal::String(s) => (Value::str(s), Type::String),
        Literal::Bytes(b) => (Value::Bytes(Arc::from(b.as_slice())), Type::Bytes),
    };
    (Node::Const(v), t)
}

fn type_constant(t: Type) -> (Node, Type) {
    let name = standard::type_value_name(&t);
    (Node::Const(Value::Type(Arc::from(name))), Type::Kind(Box::new(t)))
}

/// `target.field` (or `target['key']`), folded into a root path when `target` is one.
fn extend_root_path(target: Node, key: Key, is_index: bool) -> Node {
    match target {
        Node::Root => Node::RootPath(vec![(key, is_index)]),
        Node::RootPath(mut path) => {
            path.push((key, is_index));
            Node::RootPath(path)
        }
        other => Node::Select {
            target: Box::new(other),
            field: key,
            optional: false,
        },
    }
}

fn field_key(field: &str) -> Key {
    Key::String(Arc::from(field))
}

/// The type of `target.field` (or `target.?field`) for a target of type `t`.
fn select_type(t: &Type, optional: bool) -> Result<Type, CompileError> {
    let field = match t {
        Type::Map(k, v) if matches!(**k, Type::String | Type::Dyn) => (**v).clone(),
        Type::Dyn => Type::Dyn,
        Type::Optional(inner) => return select_type(inner, false).map(Type::optional),
        other => {
            return Err(check_err(format!(
                "type '{other}' does not support field selection"
            )));
        }
    };
    Ok(if optional { Type::optional(field) } else { field })
}

fn type_list(types: &[Type]) -> String {
    types.iter().map(Type::to_string).collect::<Vec<_>>().join(", ")
}

fn no_matching(name: &str, member: bool, types: &[Type]) -> CompileError {
    let applied = if member {
        format!("{}.({})", types[0], type_list(&types[1..]))
    } else {
        format!("({})", type_list(types))
    };
    check_err(format!(
        "found no matching overload for '{name}' applied to '{applied}'"
    ))
}

/// The overloads of `name` that accept arguments of these types, and the call's type: the
/// result of the one that matches, or `dyn` when several with different results do.
pub fn resolve(
    name: &str,
    member: bool,
    types: &[Type],
) -> Result<(Vec<&'static Overload>, Type), CompileError> {
    let Some(function) = library::library().function(name) else {
        return Err(undeclared(name));
    };
    let mut matched = Vec::new();
    let mut result: Option<Type> = None;
    for o in &function.overloads {
        if o.member != member || o.params.len() != types.len() {
            continue;
        }
        let mut bindings = Bindings::default();
        if o.params
            .iter()
            .zip(types)
            .all(|(p, a)| assignable(p, a, &mut bindings))
        {
            let r = o.result.substitute(&bindings);
            result = Some(match result {
                None => r,
                Some(prev) => Type::join(&prev, &r),
            });
            matched.push(o);
        }
    }
    match result {
        Some(r) => Ok((matched, r)),
        None => Err(no_matching(function.name, member, types)),
    }
}

fn call_node(name: &str, overloads: Vec<&'static Overload>, args: Vec<Node>) -> Node {
    Node::Call {
        name: Arc::from(name),
        overloads,
        args,
    }
}

fn string_constant(n: &Node) -> Option<&str> {
    match n {
        Node::Const(Value::String(s)) => Some(s),
        _ => None,
    }
}

/// A regex call whose pattern (argument `at`) is a literal, planned with the pattern compiled
/// once. A bad constant pattern fails `find`/`findAll` now and `matches` when it runs.
fn constant_regex(op: RegexOp, nodes: &[Node], at: usize) -> Result<Option<Node>, CompileError> {
    let Some(pattern) = nodes.get(at).and_then(string_constant) else {
        return Ok(None);
    };
    let compiled = regex::compile(pattern);
    if let (Err(e), RegexOp::Find | RegexOp::FindAll) = (&compiled, &op) {
        return Err(CompileError::Instantiate(e.clone()));
    }
    let mut rest = nodes.iter();
    let text = rest.next().cloned();
    let limit = nodes.get(2).cloned();
    Ok(text.map(|text| Node::Regex {
        op,
        text: Box::new(text),
        regex: compiled.map(Arc::new),
        limit: limit.map(Box::new),
        literals: regex::whole_match_literals(pattern),
    }))
}

/// cel-go checks a literal format string (and literal arguments) when it compiles.
fn check_constant_format(nodes: &[Node]) -> Result<(), CompileError> {
    let Some(f) = nodes.first().and_then(string_constant) else {
        return Ok(());
    };
    parse_format(f).map_err(check_err)?;
    if let Some(Node::List(items)) = nodes.get(1) {
        let constants: Option<Vec<Value>> = items
            .iter()
            .map(|(n, optional)| match (n, optional) {
                (Node::Const(v), false) => Some(v.clone()),
                _ => None,
            })
            .collect();
        if let Some(args) = constants {
            format_string(f, &args).map_err(|e| {
                // cel-go prefixes only the argument-type errors.
                check_err(if e.contains("clause can only be used") {
                    format!("error during formatting: {e}")
                } else {
                    e
                })
            })?;
        }
    }
    Ok(())
}
