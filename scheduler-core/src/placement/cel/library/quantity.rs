//! The Kubernetes `quantity` library: `quantity`, `isQuantity` and the methods of a
//! [`Quantity`].

use super::super::types::{Opaque as OpaqueType, Type};
use super::super::value::quantity::Quantity;
use super::super::value::{EvalResult, Object, Value};
use super::{Library, Ordered, args::mismatch, opaque};

pub fn declare(lib: &mut Library) {
    use Type::*;
    let q = || opaque(OpaqueType::Quantity);
    lib.global("quantity", vec![String], q(), to_quantity);
    lib.global("isQuantity", vec![String], Bool, is_quantity);
    lib.global("sign", vec![q()], Int, sign);
    lib.comparisons::<Quantity>(q());
    lib.member("asApproximateFloat", vec![q()], Double, as_approximate_float);
    lib.member("asInteger", vec![q()], Int, as_integer);
    lib.member("isInteger", vec![q()], Bool, is_integer);
    lib.member("add", vec![q(), q()], q(), add);
    lib.member("add", vec![q(), Int], q(), add);
    lib.member("sub", vec![q(), q()], q(), sub);
    lib.member("sub", vec![q(), Int], q(), sub);
}

fn quantity_at<'v>(f: &str, a: &'v [Value], i: usize) -> Result<&'v Quantity, String> {
    match a.get(i) {
        Some(Value::Object(o)) => match &**o {
            Object::Quantity(q) => Ok(q),
            _ => Err(mismatch(f, a)),
        },
        _ => Err(mismatch(f, a)),
    }
}

/// The second operand: a quantity, or an int taken as a whole quantity.
fn operand(f: &str, a: &[Value]) -> Result<Quantity, String> {
    match a.get(1) {
        Some(Value::Int(i)) => Ok(Quantity::whole(*i)),
        _ => quantity_at(f, a, 1).cloned(),
    }
}

fn to_quantity(a: &[Value]) -> EvalResult {
    match a {
        [Value::String(s)] => Quantity::parse(s).map(|q| Value::object(Object::Quantity(q))),
        _ => Err(mismatch("quantity", a)),
    }
}

fn is_quantity(a: &[Value]) -> EvalResult {
    match a {
        [Value::String(s)] => Ok(Value::Bool(Quantity::parse(s).is_ok())),
        _ => Err(mismatch("isQuantity", a)),
    }
}

fn sign(a: &[Value]) -> EvalResult {
    quantity_at("sign", a, 0).map(|q| Value::Int(q.signum()))
}

impl Ordered for Quantity {
    fn at<'v>(f: &str, a: &'v [Value], i: usize) -> Result<&'v Self, String> {
        quantity_at(f, a, i)
    }

    fn order(&self, other: &Self) -> std::cmp::Ordering {
        self.cmp(other)
    }
}

fn as_approximate_float(a: &[Value]) -> EvalResult {
    quantity_at("asApproximateFloat", a, 0).map(|q| Value::Double(q.approximate()))
}

fn as_integer(a: &[Value]) -> EvalResult {
    quantity_at("asInteger", a, 0)?
        .as_int()
        .map(Value::Int)
        .ok_or_else(|| "cannot convert value to integer".to_string())
}

fn is_integer(a: &[Value]) -> EvalResult {
    quantity_at("isInteger", a, 0).map(|q| Value::Bool(q.as_int().is_some()))
}

fn add(a: &[Value]) -> EvalResult {
    let sum = quantity_at("add", a, 0)?.plus(&operand("add", a)?)?;
    Ok(Value::object(Object::Quantity(sum)))
}

fn sub(a: &[Value]) -> EvalResult {
    let difference = quantity_at("sub", a, 0)?.minus(&operand("sub", a)?)?;
    Ok(Value::object(Object::Quantity(difference)))
}
