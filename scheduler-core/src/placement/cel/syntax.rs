//! CEL lexer and parser: the expression grammar of the CEL language definition with cel-go's
//! optional syntax (`x.?f`, `x[?k]`, `[?e]`, `{?k: v}`), without message construction.

use std::fmt;

#[derive(Clone, Debug, PartialEq)]
pub enum Literal {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    String(String),
    Bytes(Vec<u8>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

impl fmt::Display for BinaryOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BinaryOp::Or => "||",
            BinaryOp::And => "&&",
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::In => "in",
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Rem => "%",
        })
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Literal(Literal),
    Ident(String),
    Select(Box<Expr>, String),
    /// `target.?field`.
    OptSelect(Box<Expr>, String),
    Index(Box<Expr>, Box<Expr>),
    /// `target[?index]`.
    OptIndex(Box<Expr>, Box<Expr>),
    /// A global call `f(args)`.
    Call(String, Vec<Expr>),
    /// A receiver call `target.f(args)`.
    Method(Box<Expr>, String, Vec<Expr>),
    /// Elements, each marked when written `?e` (included only when the optional has a value).
    List(Vec<(Expr, bool)>),
    /// Entries, each marked when written `?k: v`.
    Map(Vec<(Expr, Expr, bool)>),
    Not(Box<Expr>),
    Neg(Box<Expr>),
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    Conditional(Box<Expr>, Box<Expr>, Box<Expr>),
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Ident(String),
    Lit(Literal),
    /// `9223372036854775808`: only valid negated, as the smallest int.
    MinIntMagnitude,
    Punct(&'static str),
}

const PUNCT: [&str; 26] = [
    "||", "&&", "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%", "!", "?", ":", ".", ",", "(", ")",
    "[", "]", "{", "}", "=", "|",
];

const RESERVED: [&str; 17] = [
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

fn lex(src: &str) -> Result<Vec<(Token, usize)>, String> {
    let bytes = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'/' && bytes.get(i + 1) == Some(&b'/') {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        let start = i;
        // String literals, optionally raw (r"...").
        let raw = (c == b'r' || c == b'R') && matches!(bytes.get(i + 1), Some(b'"' | b'\''));
        if c == b'"' || c == b'\'' || raw {
            if raw {
                i += 1;
            }
            let (s, next) = lex_string(src, i, raw)?;
            out.push((Token::Lit(Literal::String(s)), start));
            i = next;
            continue;
        }
        // Bytes literals: b"..", optionally raw (br".." / rb"..").
        let prefix = bytes_prefix(&bytes[i..]);
        if prefix > 0 {
            let raw = prefix == 2;
            let (b, next) = lex_bytes(src, i + prefix, raw)?;
            out.push((Token::Lit(Literal::Bytes(b)), start));
            i = next;
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let word = &src[start..i];
            let tok = match word {
                "true" => Token::Lit(Literal::Bool(true)),
                "false" => Token::Lit(Literal::Bool(false)),
                "null" => Token::Lit(Literal::Null),
                "in" => Token::Punct("in"),
                w if RESERVED.contains(&w) => {
                    return Err(format!("Syntax error: reserved identifier: {w}"));
                }
                w => Token::Ident(w.to_string()),
            };
            out.push((tok, start));
            continue;
        }
        if c.is_ascii_digit() || (c == b'.' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            let (token, next) = lex_number(src, i)?;
            out.push((token, start));
            i = next;
            continue;
        }
        match PUNCT.iter().find(|p| src[i..].starts_with(**p)) {
            Some(p) if *p != "=" && *p != "|" => {
                out.push((Token::Punct(p), start));
                i += p.len();
            }
            _ => {
                let ch = src[i..].chars().next().unwrap_or('?');
                return Err(format!(
                    "Syntax error: token recognition error at: '{ch}' (offset {i})"
                ));
            }
        }
    }
    Ok(out)
}

fn lex_number(src: &str, start: usize) -> Result<(Token, usize), String> {
    let bytes = src.as_bytes();
    let mut i = start;
    if src[i..].starts_with("0x") || src[i..].starts_with("0X") {
        i += 2;
        let digits_start = i;
        while i < bytes.len() && bytes[i].is_ascii_hexdigit() {
            i += 1;
        }
        let digits = &src[digits_start..i];
        if bytes.get(i).is_some_and(|b| *b == b'u' || *b == b'U') {
            let v =
                u64::from_str_radix(digits, 16).map_err(|_| format!("invalid uint literal 0x{digits}"))?;
            return Ok((Token::Lit(Literal::Uint(v)), i + 1));
        }
        let v = i64::from_str_radix(digits, 16).map_err(|_| format!("invalid int literal 0x{digits}"))?;
        return Ok((Token::Lit(Literal::Int(v)), i));
    }
    while i < bytes.len() && bytes[i].is_ascii_digit() {
        i += 1;
    }
    let mut is_double = false;
    if i < bytes.len() && bytes[i] == b'.' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit) {
        is_double = true;
        i += 1;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
    }
    if i < bytes.len() && (bytes[i] == b'e' || bytes[i] == b'E') {
        let mut j = i + 1;
        if j < bytes.len() && (bytes[j] == b'+' || bytes[j] == b'-') {
            j += 1;
        }
        if j < bytes.len() && bytes[j].is_ascii_digit() {
            is_double = true;
            i = j;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
        }
    }
    let text = &src[start..i];
    if is_double {
        let v: f64 = text
            .parse()
            .map_err(|_| format!("invalid double literal {text}"))?;
        return Ok((Token::Lit(Literal::Double(v)), i));
    }
    if bytes.get(i).is_some_and(|b| *b == b'u' || *b == b'U') {
        let v: u64 = text.parse().map_err(|_| format!("invalid uint literal {text}"))?;
        return Ok((Token::Lit(Literal::Uint(v)), i + 1));
    }
    if text.trim_start_matches('0') == "9223372036854775808" {
        return Ok((Token::MinIntMagnitude, i));
    }
    let v: i64 = text.parse().map_err(|_| format!("invalid int literal {text}"))?;
    Ok((Token::Lit(Literal::Int(v)), i))
}

/// The length of a bytes-literal prefix at the start of `b` (`b`: 1, `br`/`rb`: 2), or 0.
fn bytes_prefix(b: &[u8]) -> usize {
    let quote = |i: usize| matches!(b.get(i), Some(b'"' | b'\''));
    let is = |i: usize, set: &[u8]| b.get(i).is_some_and(|c| set.contains(c));
    if is(0, b"bB") && quote(1) {
        1
    } else if ((is(0, b"bB") && is(1, b"rR")) || (is(0, b"rR") && is(1, b"bB"))) && quote(2) {
        2
    } else {
        0
    }
}

/// The scan both literal kinds share: the delimiter (`'`, `"` or either tripled), the end of the
/// literal, and no raw newline in a single-quoted one. `escape` reads the escape sequence at a
/// backslash (never called for raw literals) and returns where the text goes on; `plain` takes
/// every other character. Returns the offset after the closing delimiter.
fn scan_literal<T>(
    src: &str,
    start: usize,
    raw: bool,
    what: &str,
    out: &mut T,
    mut escape: impl FnMut(&mut T, usize) -> Result<usize, String>,
    mut plain: impl FnMut(&mut T, char),
) -> Result<usize, String> {
    let quote = &src[start..start + 1];
    let triple = src[start..].starts_with(&quote.repeat(3));
    let delim = if triple {
        quote.repeat(3)
    } else {
        quote.to_string()
    };
    let mut i = start + delim.len();
    loop {
        if i >= src.len() {
            return Err(format!(
                "Syntax error: unterminated {what} literal (offset {start})"
            ));
        }
        if src[i..].starts_with(&delim) {
            return Ok(i + delim.len());
        }
        let ch = src[i..].chars().next().unwrap_or('\0');
        if !triple && (ch == '\n' || ch == '\r') {
            return Err(format!("Syntax error: newline in {what} literal (offset {i})"));
        }
        if ch == '\\' && !raw {
            i = escape(out, i)?;
            continue;
        }
        plain(out, ch);
        i += ch.len_utf8();
    }
}

fn push_utf8(out: &mut Vec<u8>, ch: char) {
    let mut buf = [0u8; 4];
    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
}

/// A bytes literal: like a string literal, except that `\x`, octal escapes and raw text give
/// bytes, not code points.
fn lex_bytes(src: &str, start: usize, raw: bool) -> Result<(Vec<u8>, usize), String> {
    let mut out = Vec::new();
    let end = scan_literal(
        src,
        start,
        raw,
        "bytes",
        &mut out,
        |out, i| {
            let next = src[i + 1..].chars().next();
            if let Some(c @ ('x' | 'X' | '0'..='3')) = next {
                let (len, radix, skip) = if matches!(c, 'x' | 'X') {
                    (2, 16, 1)
                } else {
                    (3, 8, 0)
                };
                let digits = src
                    .get(i + 1 + skip..i + 1 + skip + len)
                    .ok_or("Syntax error: short escape sequence")?;
                let byte = u8::from_str_radix(digits, radix)
                    .map_err(|_| format!("Syntax error: invalid escape \\{c}{digits}"))?;
                out.push(byte);
                return Ok(i + 1 + skip + len);
            }
            if matches!(next, Some('u' | 'U')) {
                return Err(format!(
                    "Syntax error: unicode escapes are not allowed in bytes literals (offset {i})"
                ));
            }
            let (decoded, next) = lex_escape(src, i)?;
            push_utf8(out, decoded);
            Ok(next)
        },
        push_utf8,
    )?;
    Ok((out, end))
}

fn lex_string(src: &str, start: usize, raw: bool) -> Result<(String, usize), String> {
    let mut out = String::new();
    let end = scan_literal(
        src,
        start,
        raw,
        "string",
        &mut out,
        |out, i| {
            let (decoded, next) = lex_escape(src, i)?;
            out.push(decoded);
            Ok(next)
        },
        |out, ch| out.push(ch),
    )?;
    Ok((out, end))
}

fn lex_escape(src: &str, i: usize) -> Result<(char, usize), String> {
    let rest = &src[i + 1..];
    let c = rest.chars().next().ok_or("Syntax error: dangling escape")?;
    let simple = match c {
        'n' => Some('\n'),
        'r' => Some('\r'),
        't' => Some('\t'),
        'a' => Some('\u{7}'),
        'b' => Some('\u{8}'),
        'f' => Some('\u{c}'),
        'v' => Some('\u{b}'),
        '\\' => Some('\\'),
        '"' => Some('"'),
        '\'' => Some('\''),
        '`' => Some('`'),
        '?' => Some('?'),
        _ => None,
    };
    if let Some(s) = simple {
        return Ok((s, i + 2));
    }
    let (len, radix, skip) = match c {
        'x' | 'X' => (2, 16, 1),
        'u' => (4, 16, 1),
        'U' => (8, 16, 1),
        '0'..='3' => (3, 8, 0),
        _ => return Err(format!("Syntax error: invalid escape sequence \\{c}")),
    };
    let digits = rest
        .get(skip..skip + len)
        .ok_or("Syntax error: short escape sequence")?;
    let code = u32::from_str_radix(digits, radix)
        .map_err(|_| format!("Syntax error: invalid escape \\{c}{digits}"))?;
    let ch = char::from_u32(code).ok_or_else(|| format!("Syntax error: invalid code point {code}"))?;
    Ok((ch, i + 1 + skip + len))
}

struct Parser {
    tokens: Vec<(Token, usize)>,
    pos: usize,
    /// How deep the tree under construction is nested (see [`Parser::nest`]).
    depth: usize,
}

/// How deeply an expression may nest (sub-expressions, chained operators, member accesses).
/// cel-go allows 250; parsing costs several KiB of stack per level in a debug build, so the
/// limit here is lower, to keep parsing and evaluation well inside a 2 MiB thread stack. Real
/// selectors nest a dozen levels; deeper ones fail to compile (the placement is misconfigured).
pub const MAX_DEPTH: usize = 100;
/// cel-go's default limit on the length of an expression, in code points.
const MAX_CODE_POINTS: usize = 100_000;

pub fn parse(src: &str) -> Result<Expr, String> {
    let size = src.chars().count();
    if size > MAX_CODE_POINTS {
        return Err(format!(
            "expression code point size exceeds limit: size: {size}, limit {MAX_CODE_POINTS}"
        ));
    }
    let tokens = lex(src)?;
    let mut p = Parser {
        tokens,
        pos: 0,
        depth: 0,
    };
    let e = p.expr()?;
    if let Some((t, at)) = p.tokens.get(p.pos) {
        return Err(format!("Syntax error: unexpected {} at offset {at}", describe(t)));
    }
    Ok(e)
}

fn describe(t: &Token) -> String {
    match t {
        Token::Ident(s) => format!("identifier '{s}'"),
        Token::Lit(l) => format!("literal {l:?}"),
        Token::MinIntMagnitude => "int literal 9223372036854775808 (out of range)".into(),
        Token::Punct(p) => format!("'{p}'"),
    }
}

/// `terms` joined by `op` as a balanced tree (cel-go's balancer for `&&` and `||`, whose
/// evaluation does not depend on the grouping), so long chains stay shallow.
fn balanced(op: BinaryOp, mut terms: Vec<Expr>) -> Expr {
    if terms.len() == 1 {
        return terms.remove(0);
    }
    let right = terms.split_off(terms.len().div_ceil(2));
    Expr::Binary(op, Box::new(balanced(op, terms)), Box::new(balanced(op, right)))
}

impl Parser {
    /// Counts one more level of nesting: every sub-expression, chained operator and member
    /// access adds one, so the tree (and every recursion over it, here, in the checker and in
    /// the evaluator) stays within [`MAX_DEPTH`]. Each parsing function restores the depth it
    /// started at before it returns.
    fn nest(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!(
                "Syntax error: expression recursion limit exceeded: {MAX_DEPTH}"
            ));
        }
        Ok(())
    }

    fn peek_punct(&self, p: &str) -> bool {
        matches!(self.tokens.get(self.pos), Some((Token::Punct(q), _)) if *q == p)
    }

    fn eat(&mut self, p: &str) -> bool {
        if self.peek_punct(p) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, p: &str) -> Result<(), String> {
        if self.eat(p) {
            Ok(())
        } else {
            Err(match self.tokens.get(self.pos) {
                Some((t, at)) => format!(
                    "Syntax error: expected '{p}' but found {} at offset {at}",
                    describe(t)
                ),
                None => format!("Syntax error: expected '{p}' but the expression ended"),
            })
        }
    }

    fn expr(&mut self) -> Result<Expr, String> {
        let base = self.depth;
        self.nest()?;
        let cond = self.binary(1)?;
        let out = if self.eat("?") {
            let then = self.binary(1)?;
            self.expect(":")?;
            let otherwise = self.expr()?;
            Expr::Conditional(Box::new(cond), Box::new(then), Box::new(otherwise))
        } else {
            cond
        };
        self.depth = base;
        Ok(out)
    }

    /// The binary operator at the cursor and its precedence (higher binds tighter).
    fn peek_binary(&self) -> Option<(BinaryOp, u8)> {
        let Some((Token::Punct(p), _)) = self.tokens.get(self.pos) else {
            return None;
        };
        Some(match *p {
            "||" => (BinaryOp::Or, 1),
            "&&" => (BinaryOp::And, 2),
            "==" => (BinaryOp::Eq, 3),
            "!=" => (BinaryOp::Ne, 3),
            "<" => (BinaryOp::Lt, 3),
            "<=" => (BinaryOp::Le, 3),
            ">" => (BinaryOp::Gt, 3),
            ">=" => (BinaryOp::Ge, 3),
            "in" => (BinaryOp::In, 3),
            "+" => (BinaryOp::Add, 4),
            "-" => (BinaryOp::Sub, 4),
            "*" => (BinaryOp::Mul, 5),
            "/" => (BinaryOp::Div, 5),
            "%" => (BinaryOp::Rem, 5),
            _ => return None,
        })
    }

    /// Binary operators binding at least as tightly as `min`, left-associative (precedence
    /// climbing: one loop per level instead of one function per level keeps the recursion
    /// per parenthesis short). `&&` and `||` chains are balanced.
    fn binary(&mut self, min: u8) -> Result<Expr, String> {
        let base = self.depth;
        let mut left = self.unary()?;
        while let Some((op, precedence)) = self.peek_binary().filter(|(_, p)| *p >= min) {
            self.pos += 1;
            if matches!(op, BinaryOp::Or | BinaryOp::And) {
                let mut terms = vec![left, self.binary(precedence + 1)?];
                while self.peek_binary() == Some((op, precedence)) {
                    self.pos += 1;
                    terms.push(self.binary(precedence + 1)?);
                }
                left = balanced(op, terms);
            } else {
                self.nest()?;
                let right = self.binary(precedence + 1)?;
                left = Expr::Binary(op, Box::new(left), Box::new(right));
            }
        }
        self.depth = base;
        Ok(left)
    }

    /// A run of `!` or of `-` counts only by its parity, as in cel-go: `!!x` is `x`.
    fn unary(&mut self) -> Result<Expr, String> {
        let op = if self.peek_punct("!") {
            "!"
        } else if self.peek_punct("-") {
            "-"
        } else {
            return self.member();
        };
        let mut count = 0usize;
        while self.eat(op) {
            count += 1;
        }
        let base = self.depth;
        self.nest()?;
        let odd = count % 2 == 1;
        let out = if op == "!" {
            let inner = self.unary()?;
            if odd { Expr::Not(Box::new(inner)) } else { inner }
        } else if odd && matches!(self.tokens.get(self.pos), Some((Token::MinIntMagnitude, _))) {
            self.pos += 1;
            Expr::Literal(Literal::Int(i64::MIN))
        } else if let Some((Token::Lit(Literal::Int(_) | Literal::Double(_)), _)) = self.tokens.get(self.pos)
        {
            // A negated numeric literal is folded into the literal.
            match self.member()? {
                Expr::Literal(Literal::Int(v)) if odd => Expr::Literal(Literal::Int(-v)),
                Expr::Literal(Literal::Double(v)) if odd => Expr::Literal(Literal::Double(-v)),
                other if odd => Expr::Neg(Box::new(other)),
                other => other,
            }
        } else {
            let inner = self.unary()?;
            if odd { Expr::Neg(Box::new(inner)) } else { inner }
        };
        self.depth = base;
        Ok(out)
    }

    fn member(&mut self) -> Result<Expr, String> {
        let base = self.depth;
        let mut e = self.primary()?;
        loop {
            if self.peek_punct(".") || self.peek_punct("[") {
                self.nest()?;
            }
            if self.eat(".") {
                let optional = self.eat("?");
                let name = self.ident()?;
                if optional {
                    e = Expr::OptSelect(Box::new(e), name);
                } else if self.eat("(") {
                    let args = self.list_until(")")?;
                    e = Expr::Method(Box::new(e), name, args);
                } else {
                    e = Expr::Select(Box::new(e), name);
                }
            } else if self.eat("[") {
                let optional = self.eat("?");
                let index = self.expr()?;
                self.expect("]")?;
                e = if optional {
                    Expr::OptIndex(Box::new(e), Box::new(index))
                } else {
                    Expr::Index(Box::new(e), Box::new(index))
                };
            } else {
                self.depth = base;
                return Ok(e);
            }
        }
    }

    fn ident(&mut self) -> Result<String, String> {
        match self.tokens.get(self.pos) {
            Some((Token::Ident(s), _)) => {
                let s = s.clone();
                self.pos += 1;
                Ok(s)
            }
            Some((t, at)) => Err(format!(
                "Syntax error: expected an identifier but found {} at offset {at}",
                describe(t)
            )),
            None => Err("Syntax error: expected an identifier but the expression ended".into()),
        }
    }

    fn list_until(&mut self, close: &str) -> Result<Vec<Expr>, String> {
        let mut items = Vec::new();
        if self.eat(close) {
            return Ok(items);
        }
        loop {
            items.push(self.expr()?);
            if self.eat(close) {
                return Ok(items);
            }
            self.expect(",")?;
            if self.eat(close) {
                return Ok(items);
            }
        }
    }

    fn primary(&mut self) -> Result<Expr, String> {
        let Some((tok, _)) = self.tokens.get(self.pos) else {
            return Err("Syntax error: the expression ended unexpectedly".into());
        };
        match tok {
            Token::Lit(l) => {
                let literal = Expr::Literal(l.clone());
                self.pos += 1;
                Ok(literal)
            }
            Token::Ident(name) => {
                let name = name.clone();
                self.pos += 1;
                if self.eat("(") {
                    Ok(Expr::Call(name, self.list_until(")")?))
                } else {
                    Ok(Expr::Ident(name))
                }
            }
            Token::Punct("(") => {
                self.pos += 1;
                self.parenthesized()
            }
            Token::Punct("[") => {
                self.pos += 1;
                self.list_literal()
            }
            Token::Punct("{") => {
                self.pos += 1;
                self.map_literal()
            }
            Token::Punct(_) | Token::MinIntMagnitude => Err(self.unexpected()),
        }
    }

    fn parenthesized(&mut self) -> Result<Expr, String> {
        let e = self.expr()?;
        self.expect(")")?;
        Ok(e)
    }

    /// `[e, ?e, ...]` after the opening bracket.
    fn list_literal(&mut self) -> Result<Expr, String> {
        let mut items = Vec::new();
        if self.eat("]") {
            return Ok(Expr::List(items));
        }
        loop {
            let optional = self.eat("?");
            items.push((self.expr()?, optional));
            if self.eat("]") {
                return Ok(Expr::List(items));
            }
            self.expect(",")?;
            if self.eat("]") {
                return Ok(Expr::List(items));
            }
        }
    }

    /// `{k: v, ?k: v, ...}` after the opening brace.
    fn map_literal(&mut self) -> Result<Expr, String> {
        let mut entries = Vec::new();
        if self.eat("}") {
            return Ok(Expr::Map(entries));
        }
        loop {
            let optional = self.eat("?");
            let k = self.expr()?;
            self.expect(":")?;
            let v = self.expr()?;
            entries.push((k, v, optional));
            if self.eat("}") {
                return Ok(Expr::Map(entries));
            }
            self.expect(",")?;
            if self.eat("}") {
                return Ok(Expr::Map(entries));
            }
        }
    }

    /// The error for the token at the cursor, which cannot start an expression.
    #[cold]
    fn unexpected(&self) -> String {
        match self.tokens.get(self.pos) {
            Some((t, at)) => format!("Syntax error: unexpected {} at offset {at}", describe(t)),
            None => "Syntax error: the expression ended unexpectedly".into(),
        }
    }
}

#[cfg(test)]
#[path = "syntax_tests.rs"]
mod tests;
