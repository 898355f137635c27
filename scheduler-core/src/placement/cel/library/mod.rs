//! Every function of OCM's placement CEL environment, with its overload signatures (for the
//! checker) and implementations (for the evaluator). The operators are declared here too, so one
//! table decides both what compiles and what runs.
//!
//! One module per library: [`standard`] (CEL's standard functions and conversions), [`strings`]
//! (cel-go `ext.Strings`), [`optional`] (`cel.OptionalTypes`), [`lists`], [`regex`], [`url`],
//! [`quantity`], [`net`] (IP and CIDR), [`format`] and [`semver`] (the Kubernetes libraries
//! OCM registers), [`time`] (timestamps and durations) and [`json`] (OCM's `parseJSON`).
//! `managedCluster.scores(...)` needs the hub snapshot and is planned by the checker itself.

pub mod format;
pub mod json;
pub mod lists;
pub mod net;
pub mod optional;
pub mod quantity;
pub mod regex;
pub mod semver;
pub mod standard;
pub mod strings;
pub mod time;
pub mod url;

use super::types::{Opaque, Type};
use super::value::{EvalResult, Value};
use ::std::collections::HashMap;
use ::std::sync::LazyLock;

/// An overload's implementation: the arguments, receiver first for member functions.
pub type Impl = fn(&[Value]) -> EvalResult;

pub struct Overload {
    /// Whether it is called as `receiver.f(args)` (true) or `f(args)`.
    pub member: bool,
    /// Parameter types, the receiver first for member overloads.
    pub params: Vec<Type>,
    pub result: Type,
    pub imp: Impl,
}

impl std::fmt::Debug for Overload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let params: Vec<String> = self.params.iter().map(|p| p.to_string()).collect();
        write!(f, "({}) -> {}", params.join(", "), self.result)
    }
}

pub struct Function {
    pub name: &'static str,
    pub overloads: Vec<Overload>,
}

/// All declared functions by name (qualified names such as `optional.of` included).
pub struct Library {
    functions: HashMap<&'static str, Function>,
}

impl Library {
    pub fn function(&self, name: &str) -> Option<&Function> {
        self.functions.get(name)
    }

    fn add(&mut self, name: &'static str, member: bool, params: Vec<Type>, result: Type, imp: Impl) {
        self.functions
            .entry(name)
            .or_insert_with(|| Function {
                name,
                overloads: Vec::new(),
            })
            .overloads
            .push(Overload {
                member,
                params,
                result,
                imp,
            });
    }

    /// Declares a global overload.
    pub fn global(&mut self, name: &'static str, params: Vec<Type>, result: Type, imp: Impl) {
        self.add(name, false, params, result, imp);
    }

    /// Declares a member overload; `params[0]` is the receiver.
    pub fn member(&mut self, name: &'static str, params: Vec<Type>, result: Type, imp: Impl) {
        self.add(name, true, params, result, imp);
    }

    /// Declares `isGreaterThan`, `isLessThan` and `compareTo` on `ty`, whose values are `T`s: the
    /// three methods Kubernetes' quantity and semver libraries both give their values.
    pub fn comparisons<T: Ordered>(&mut self, ty: Type) {
        self.member(
            "isGreaterThan",
            vec![ty.clone(), ty.clone()],
            Type::Bool,
            is_greater_than::<T>,
        );
        self.member(
            "isLessThan",
            vec![ty.clone(), ty.clone()],
            Type::Bool,
            is_less_than::<T>,
        );
        self.member("compareTo", vec![ty.clone(), ty], Type::Int, compare_to::<T>);
    }
}

/// An opaque value with a total order, compared by [`Library::comparisons`].
pub trait Ordered {
    /// Argument `i` of `f`'s arguments `a` as a `Self`, or the mismatch error naming `f`.
    fn at<'v>(f: &str, a: &'v [Value], i: usize) -> Result<&'v Self, String>;
    fn order(&self, other: &Self) -> ::std::cmp::Ordering;
}

fn ordering<T: Ordered>(f: &str, a: &[Value]) -> Result<::std::cmp::Ordering, String> {
    Ok(T::at(f, a, 0)?.order(T::at(f, a, 1)?))
}

fn is_greater_than<T: Ordered>(a: &[Value]) -> EvalResult {
    ordering::<T>("isGreaterThan", a).map(|o| Value::Bool(o.is_gt()))
}

fn is_less_than<T: Ordered>(a: &[Value]) -> EvalResult {
    ordering::<T>("isLessThan", a).map(|o| Value::Bool(o.is_lt()))
}

fn compare_to<T: Ordered>(a: &[Value]) -> EvalResult {
    ordering::<T>("compareTo", a).map(|o| Value::Int(o as i64))
}

/// The type parameters signatures use.
pub const A: Type = Type::Param(0);
pub const B: Type = Type::Param(1);

pub fn opaque(o: Opaque) -> Type {
    Type::Opaque(o)
}

static LIBRARY: LazyLock<Library> = LazyLock::new(|| {
    let mut lib = Library {
        functions: HashMap::new(),
    };
    standard::declare(&mut lib);
    time::declare(&mut lib);
    strings::declare(&mut lib);
    optional::declare(&mut lib);
    lists::declare(&mut lib);
    regex::declare(&mut lib);
    url::declare(&mut lib);
    quantity::declare(&mut lib);
    net::declare(&mut lib);
    format::declare(&mut lib);
    semver::declare(&mut lib);
    json::declare(&mut lib);
    lib
});

pub fn library() -> &'static Library {
    &LIBRARY
}

/// Whether a run-time value fits a declared parameter type (kinds only, as cel-go's dispatch
/// checks them: a `list(int)` parameter takes any list).
pub fn fits(param: &Type, v: &Value) -> bool {
    match (param, v) {
        (Type::Dyn | Type::Param(_), _) => true,
        (Type::Null, Value::Null)
        | (Type::Bool, Value::Bool(_))
        | (Type::Int, Value::Int(_))
        | (Type::Uint, Value::Uint(_))
        | (Type::Double, Value::Double(_))
        | (Type::String, Value::String(_))
        | (Type::Bytes, Value::Bytes(_))
        | (Type::Timestamp, Value::Timestamp(_))
        | (Type::Duration, Value::Duration(_))
        | (Type::List(_), Value::List(_))
        | (Type::Map(..), Value::Map(_))
        | (Type::Optional(_), Value::Optional(_))
        | (Type::Kind(_), Value::Type(_)) => true,
        (Type::Opaque(o), Value::Object(obj)) => obj.opaque() == *o,
        _ => false,
    }
}

/// Helpers the library modules share to unpack arguments their signatures guarantee.
pub mod args {
    use super::super::value::{Value, no_overload};

    pub fn mismatch(f: &str, args: &[Value]) -> String {
        let refs: Vec<&Value> = args.iter().collect();
        no_overload(f, &refs)
    }
}
