//! Tests of `syntax.rs`, kept beside it so the code reads without them.

use super::*;

#[test]
fn parses_precedence_and_members() {
    let e = parse("a.b[\"c\"] == 1 && !x || y").expect("the input must be accepted");
    let Expr::Binary(BinaryOp::Or, left, _) = e else {
        panic!("{e:?}")
    };
    assert!(matches!(*left, Expr::Binary(BinaryOp::And, _, _)));
    let e = parse("l.exists(c, c.name == 'x')").expect("the input must be accepted");
    assert!(matches!(e, Expr::Method(_, ref m, ref args) if m == "exists" && args.len() == 2));
    assert_eq!(
        parse("-5").expect("the input must be accepted"),
        Expr::Literal(Literal::Int(-5))
    );
    assert_eq!(
        parse("1 + 2 * 3").expect("the input must be accepted"),
        parse("1 + (2 * 3)").expect("the input must be accepted")
    );
}

#[test]
fn lexes_literals() {
    assert_eq!(
        parse("0x10").expect("the input must be accepted"),
        Expr::Literal(Literal::Int(16))
    );
    assert_eq!(
        parse("3u").expect("the input must be accepted"),
        Expr::Literal(Literal::Uint(3))
    );
    assert_eq!(
        parse("1.5e1").expect("the input must be accepted"),
        Expr::Literal(Literal::Double(15.0))
    );
    assert_eq!(
        parse(r#"'a\n\x41'"#).expect("the input must be accepted"),
        Expr::Literal(Literal::String("a\nA".into()))
    );
    assert_eq!(
        parse(r#"r'a\n'"#).expect("the input must be accepted"),
        Expr::Literal(Literal::String("a\\n".into()))
    );
    assert_eq!(
        parse("'''x'y'''").expect("the input must be accepted"),
        Expr::Literal(Literal::String("x'y".into()))
    );
}

#[test]
fn runs_of_unary_operators_collapse_by_parity() {
    // Like cel-go, `!!x` is `x` and `--x` is `x`: a long run must not nest the tree.
    let even = format!("{}x", "!".repeat(50_000));
    assert_eq!(parse(&even), Ok(Expr::Ident("x".into())));
    let odd = format!("{}x", "!".repeat(50_001));
    assert_eq!(parse(&odd), Ok(Expr::Not(Box::new(Expr::Ident("x".into())))));
    let negated = format!("{}5", "-".repeat(50_001));
    assert_eq!(parse(&negated), Ok(Expr::Literal(Literal::Int(-5))));
}

#[test]
fn deep_trees_are_refused_before_they_exhaust_the_stack() {
    // Chains of left-associative operators and member accesses nest the tree as deeply as
    // they are long.
    let sum = format!("1{}", " + 1".repeat(20_000));
    assert!(parse(&sum).is_err_and(|e| e.contains("recursion limit")));
    let path = format!("a{}", ".b".repeat(40_000));
    assert!(parse(&path).is_err_and(|e| e.contains("recursion limit")));
    let alternating = format!("{}true", "!-".repeat(30_000));
    assert!(parse(&alternating).is_err_and(|e| e.contains("recursion limit")));
    let nested = format!("{}1{}", "(".repeat(MAX_DEPTH), ")".repeat(MAX_DEPTH));
    assert!(parse(&nested).is_err_and(|e| e.contains("recursion limit")));
    let nested = format!("{}1{}", "(".repeat(MAX_DEPTH - 1), ")".repeat(MAX_DEPTH - 1));
    assert!(parse(&nested).is_ok());
    // Logical chains are balanced like cel-go's, so a long one stays shallow.
    let any = vec!["x"; 5_000].join(" || ");
    assert!(parse(&any).is_ok());
    let all = vec!["x"; 5_000].join(" && ");
    assert!(parse(&all).is_ok());
}

#[test]
fn expressions_are_limited_to_100000_code_points() {
    let long = format!("'{}'", "é".repeat(99_998));
    assert!(parse(&long).is_ok());
    let too_long = format!("'{}'", "é".repeat(99_999));
    assert!(parse(&too_long).is_err_and(|e| e.contains("exceeds limit")));
}

#[test]
fn the_smallest_int_is_a_literal() {
    // 9223372036854775808 does not fit an int; negated it is the smallest one.
    assert_eq!(
        parse("-9223372036854775808"),
        Ok(Expr::Literal(Literal::Int(i64::MIN)))
    );
    assert!(parse("9223372036854775808").is_err());
    assert!(parse("--9223372036854775808").is_err());
    assert!(parse("-9223372036854775809").is_err());
}

#[test]
fn rejects_bad_syntax() {
    for bad in [
        "a ==", "(a", "a.", "1 +* 2", "if", "a = b", "'open", "a.?", "a[?]", "b'open",
    ] {
        assert!(parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn parses_optional_syntax_and_bytes() {
    assert!(matches!(parse("a.?b"), Ok(Expr::OptSelect(_, ref f)) if f == "b"));
    assert!(matches!(parse("a[?'k']"), Ok(Expr::OptIndex(..))));
    assert!(matches!(parse("[?a, b]"), Ok(Expr::List(ref items)) if items[0].1 && !items[1].1));
    assert!(matches!(parse("{?'k': v}"), Ok(Expr::Map(ref entries)) if entries[0].2));
    assert_eq!(
        parse(r"b'\xffé\141'"),
        Ok(Expr::Literal(Literal::Bytes(vec![0xff, 0xc3, 0xa9, b'a'])))
    );
    assert!(parse(r"b'\u00e9'").is_err());
    assert_eq!(
        parse(r"br'\x'"),
        Ok(Expr::Literal(Literal::Bytes(b"\\x".to_vec())))
    );
}
