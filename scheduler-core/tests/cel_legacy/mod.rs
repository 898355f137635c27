//! The CEL interpreter as it was before OCM's full environment (commit 196c711^), kept only as
//! the reference the subset property test compares the new one with.
#![allow(dead_code)]

pub mod eval;
pub mod syntax;

use eval::{Environment, Evaluator, Macro, Value};
use std::cell::Cell;
use syntax::Expr;

pub const COST_BUDGET: u64 = 10_000_000;

#[derive(Clone, Debug)]
pub struct Program {
    ast: Expr,
}

const GLOBAL_FUNCTIONS: [&str; 7] = ["size", "int", "uint", "double", "string", "bool", "dyn"];
const MEMBER_FUNCTIONS: [&str; 11] = [
    "scores",
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "lowerAscii",
    "upperAscii",
    "trim",
    "split",
    "indexOf",
    "join",
];

impl Program {
    /// Parses and checks `src`; the error is the text OCM puts after `compilation failed: `.
    pub fn compile(src: &str) -> Result<Program, String> {
        let ast = syntax::parse(src).map_err(|e| format!("ERROR: <input>: {e}"))?;
        let mut scope = vec!["managedCluster".to_string()];
        check(&ast, &mut scope).map_err(|e| format!("ERROR: <input>: {e}"))?;
        Ok(Program { ast })
    }

    /// Evaluates to a bool; anything else (or a runtime error) is an `Err` with the reason.
    pub fn eval_bool(&self, env: &dyn Environment) -> Result<bool, String> {
        let budget = Cell::new(COST_BUDGET);
        match Evaluator::new(env, &budget).eval(&self.ast)? {
            Value::Bool(b) => Ok(b),
            other => Err(format!("returned a {} instead of a bool", other.type_name())),
        }
    }
}

/// Resolves identifiers and function names like cel-go's checker does for a `dyn` variable.
fn check(e: &Expr, scope: &mut Vec<String>) -> Result<(), String> {
    let undeclared = |name: &str| format!("undeclared reference to '{name}' (in container '')");
    match e {
        Expr::Literal(_) => Ok(()),
        Expr::Ident(name) => {
            if scope.iter().any(|s| s == name) {
                Ok(())
            } else {
                Err(undeclared(name))
            }
        }
        Expr::Select(t, _) => check(t, scope),
        Expr::Index(t, i) => {
            check(t, scope)?;
            check(i, scope)
        }
        Expr::List(items) => items.iter().try_for_each(|i| check(i, scope)),
        Expr::Map(entries) => entries.iter().try_for_each(|(k, v)| {
            check(k, scope)?;
            check(v, scope)
        }),
        Expr::Not(i) | Expr::Neg(i) => check(i, scope),
        Expr::Binary(_, l, r) => {
            check(l, scope)?;
            check(r, scope)
        }
        Expr::Conditional(c, t, f) => {
            check(c, scope)?;
            check(t, scope)?;
            check(f, scope)
        }
        Expr::Call(name, args) => {
            if name == "has" {
                return match args.as_slice() {
                    [Expr::Select(t, _)] => check(t, scope),
                    _ => Err("invalid argument to has() macro".into()),
                };
            }
            if !GLOBAL_FUNCTIONS.contains(&name.as_str()) {
                return Err(undeclared(name));
            }
            if args.len() != 1 {
                return Err(format!(
                    "found no matching overload for '{name}' applied to {} arguments",
                    args.len()
                ));
            }
            args.iter().try_for_each(|a| check(a, scope))
        }
        Expr::Method(target, name, args) => {
            check(target, scope)?;
            if Macro::of(name, args.len()).is_some() {
                let Expr::Ident(var) = &args[0] else {
                    return Err(format!("argument must be a simple name in {name}()"));
                };
                scope.push(var.clone());
                let result = args[1..].iter().try_for_each(|a| check(a, scope));
                scope.pop();
                return result;
            }
            if !MEMBER_FUNCTIONS.contains(&name.as_str()) {
                return Err(undeclared(name));
            }
            args.iter().try_for_each(|a| check(a, scope))
        }
    }
}
