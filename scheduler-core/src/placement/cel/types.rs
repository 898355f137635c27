//! CEL types as cel-go's checker sees them, and the assignability rule its overload resolution
//! uses: `dyn` is assignable both ways, a type parameter binds to the first type it meets, and
//! everything else must match kind for kind.

use std::fmt;

/// The opaque types of the Kubernetes libraries, by their CEL type names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opaque {
    Semver,
    Quantity,
    Ip,
    Cidr,
    Url,
    Format,
}

impl Opaque {
    pub fn name(self) -> &'static str {
        match self {
            Opaque::Semver => "kubernetes.Semver",
            Opaque::Quantity => "kubernetes.Quantity",
            Opaque::Ip => "net.IP",
            Opaque::Cidr => "net.CIDR",
            Opaque::Url => "kubernetes.URL",
            Opaque::Format => "kubernetes.NamedFormat",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Type {
    Dyn,
    Null,
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Timestamp,
    Duration,
    List(Box<Type>),
    Map(Box<Type>, Box<Type>),
    Optional(Box<Type>),
    /// The type of a type value: the expression `int` has type `type(int)`.
    Kind(Box<Type>),
    Opaque(Opaque),
    /// A type parameter of an overload signature (`A`, `B`, ...).
    Param(u8),
}

impl Type {
    pub fn list(t: Type) -> Type {
        Type::List(Box::new(t))
    }

    pub fn map(k: Type, v: Type) -> Type {
        Type::Map(Box::new(k), Box::new(v))
    }

    pub fn optional(t: Type) -> Type {
        Type::Optional(Box::new(t))
    }

    /// `a` and `b` joined the way cel-go types a list or map literal: equal types stay, any
    /// difference widens to `dyn`.
    pub fn join(a: &Type, b: &Type) -> Type {
        if a == b { a.clone() } else { Type::Dyn }
    }

    /// Replaces bound parameters; unbound ones become `dyn`.
    pub fn substitute(&self, bindings: &Bindings) -> Type {
        match self {
            Type::Param(p) => bindings.get(*p).cloned().unwrap_or(Type::Dyn),
            Type::List(t) => Type::list(t.substitute(bindings)),
            Type::Map(k, v) => Type::map(k.substitute(bindings), v.substitute(bindings)),
            Type::Optional(t) => Type::optional(t.substitute(bindings)),
            Type::Kind(t) => Type::Kind(Box::new(t.substitute(bindings))),
            other => other.clone(),
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Dyn => f.write_str("dyn"),
            Type::Null => f.write_str("null_type"),
            Type::Bool => f.write_str("bool"),
            Type::Int => f.write_str("int"),
            Type::Uint => f.write_str("uint"),
            Type::Double => f.write_str("double"),
            Type::String => f.write_str("string"),
            Type::Bytes => f.write_str("bytes"),
            Type::Timestamp => f.write_str("google.protobuf.Timestamp"),
            Type::Duration => f.write_str("google.protobuf.Duration"),
            Type::List(t) => write!(f, "list({t})"),
            Type::Map(k, v) => write!(f, "map({k}, {v})"),
            Type::Optional(t) => write!(f, "optional_type({t})"),
            Type::Kind(t) => write!(f, "type({t})"),
            Type::Opaque(o) => f.write_str(o.name()),
            Type::Param(p) => write!(f, "{}", char::from(b'A' + p)),
        }
    }
}

/// What the type parameters of one signature are bound to while it is being matched.
#[derive(Default)]
pub struct Bindings(Vec<Option<Type>>);

impl Bindings {
    fn get(&self, p: u8) -> Option<&Type> {
        self.0.get(usize::from(p)).and_then(Option::as_ref)
    }

    fn bind(&mut self, p: u8, t: Type) {
        let i = usize::from(p);
        if self.0.len() <= i {
            self.0.resize(i + 1, None);
        }
        self.0[i] = Some(t);
    }
}

/// Whether a value of type `arg` may be passed where `param` is expected, binding parameters.
pub fn assignable(param: &Type, arg: &Type, bindings: &mut Bindings) -> bool {
    match (param, arg) {
        (Type::Param(p), _) => match bindings.get(*p).cloned() {
            Some(bound) => assignable(&bound, arg, bindings),
            None => {
                bindings.bind(*p, arg.clone());
                true
            }
        },
        (Type::Dyn, _) | (_, Type::Dyn) => {
            bind_params_to_dyn(param, bindings);
            true
        }
        (Type::List(p), Type::List(a)) | (Type::Optional(p), Type::Optional(a)) => assignable(p, a, bindings),
        // Type values are all of one kind to cel-go: `type(1) != type(1u)` compiles.
        (Type::Kind(_), Type::Kind(_)) => true,
        (Type::Map(pk, pv), Type::Map(ak, av)) => {
            assignable(pk, ak, bindings) && assignable(pv, av, bindings)
        }
        _ => param == arg,
    }
}

/// A `dyn` argument matches any parameter; parameters inside it that are still free become `dyn`.
fn bind_params_to_dyn(param: &Type, bindings: &mut Bindings) {
    match param {
        Type::Param(p) if bindings.get(*p).is_none() => bindings.bind(*p, Type::Dyn),
        Type::List(t) | Type::Optional(t) | Type::Kind(t) => bind_params_to_dyn(t, bindings),
        Type::Map(k, v) => {
            bind_params_to_dyn(k, bindings);
            bind_params_to_dyn(v, bindings);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_bind_once_and_dyn_matches_anything() {
        let a = Type::Param(0);
        let mut b = Bindings::default();
        assert!(assignable(&a, &Type::Int, &mut b));
        assert!(!assignable(&a, &Type::Double, &mut b));
        assert!(assignable(&a, &Type::Dyn, &mut b));
        let mut b = Bindings::default();
        assert!(assignable(&Type::list(a.clone()), &Type::Dyn, &mut b));
        assert_eq!(a.substitute(&b), Type::Dyn);
        assert!(!assignable(&Type::String, &Type::Null, &mut Bindings::default()));
        assert_eq!(
            Type::map(Type::String, Type::optional(Type::Int)).to_string(),
            "map(string, optional_type(int))"
        );
    }
}
