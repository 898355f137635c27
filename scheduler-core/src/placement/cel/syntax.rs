//! CEL lexer and parser (the expression grammar of the CEL language definition, without
//! message construction or bytes literals).

use std::fmt;

#[derive(Clone, Debug, PartialEq)]
pub enum Literal {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    String(String),
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
    Index(Box<Expr>, Box<Expr>),
    /// A global call `f(args)`.
    Call(String, Vec<Expr>),
    /// A receiver call `target.f(args)`.
    Method(Box<Expr>, String, Vec<Expr>),
    List(Vec<Expr>),
    Map(Vec<(Expr, Expr)>),
    Not(Box<Expr>),
    Neg(Box<Expr>),
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    Conditional(Box<Expr>, Box<Expr>, Box<Expr>),
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Ident(String),
    Lit(Literal),
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
        if (c == b'b' || c == b'B') && matches!(bytes.get(i + 1), Some(b'"' | b'\'')) {
            return Err(format!(
                "Syntax error: bytes literals are not supported (at offset {i})"
            ));
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
            let (lit, next) = lex_number(src, i)?;
            out.push((Token::Lit(lit), start));
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

fn lex_number(src: &str, start: usize) -> Result<(Literal, usize), String> {
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
            return Ok((Literal::Uint(v), i + 1));
        }
        let v = i64::from_str_radix(digits, 16).map_err(|_| format!("invalid int literal 0x{digits}"))?;
        return Ok((Literal::Int(v), i));
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
        return Ok((Literal::Double(v), i));
    }
    if bytes.get(i).is_some_and(|b| *b == b'u' || *b == b'U') {
        let v: u64 = text.parse().map_err(|_| format!("invalid uint literal {text}"))?;
        return Ok((Literal::Uint(v), i + 1));
    }
    let v: i64 = text.parse().map_err(|_| format!("invalid int literal {text}"))?;
    Ok((Literal::Int(v), i))
}

fn lex_string(src: &str, start: usize, raw: bool) -> Result<(String, usize), String> {
    let quote = &src[start..start + 1];
    let triple = src[start..].starts_with(&quote.repeat(3));
    let delim = if triple {
        quote.repeat(3)
    } else {
        quote.to_string()
    };
    let mut i = start + delim.len();
    let mut out = String::new();
    loop {
        if i >= src.len() {
            return Err(format!(
                "Syntax error: unterminated string literal (offset {start})"
            ));
        }
        if src[i..].starts_with(&delim) {
            return Ok((out, i + delim.len()));
        }
        let ch = src[i..].chars().next().unwrap_or('\0');
        if !triple && (ch == '\n' || ch == '\r') {
            return Err(format!("Syntax error: newline in string literal (offset {i})"));
        }
        if ch == '\\' && !raw {
            let (decoded, next) = lex_escape(src, i)?;
            out.push(decoded);
            i = next;
            continue;
        }
        out.push(ch);
        i += ch.len_utf8();
    }
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
    depth: usize,
}

const MAX_DEPTH: usize = 250;

pub fn parse(src: &str) -> Result<Expr, String> {
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
        Token::Punct(p) => format!("'{p}'"),
    }
}

impl Parser {
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
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err("Syntax error: expression nests too deeply".into());
        }
        let cond = self.or()?;
        let out = if self.eat("?") {
            let then = self.or()?;
            self.expect(":")?;
            let otherwise = self.expr()?;
            Expr::Conditional(Box::new(cond), Box::new(then), Box::new(otherwise))
        } else {
            cond
        };
        self.depth -= 1;
        Ok(out)
    }

    fn or(&mut self) -> Result<Expr, String> {
        let mut left = self.and()?;
        while self.eat("||") {
            let right = self.and()?;
            left = Expr::Binary(BinaryOp::Or, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, String> {
        let mut left = self.relation()?;
        while self.eat("&&") {
            let right = self.relation()?;
            left = Expr::Binary(BinaryOp::And, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn relation(&mut self) -> Result<Expr, String> {
        let mut left = self.addition()?;
        loop {
            let op = [
                ("==", BinaryOp::Eq),
                ("!=", BinaryOp::Ne),
                ("<=", BinaryOp::Le),
                (">=", BinaryOp::Ge),
                ("<", BinaryOp::Lt),
                (">", BinaryOp::Gt),
                ("in", BinaryOp::In),
            ]
            .into_iter()
            .find(|(p, _)| self.peek_punct(p));
            let Some((_, op)) = op else { return Ok(left) };
            self.pos += 1;
            let right = self.addition()?;
            left = Expr::Binary(op, Box::new(left), Box::new(right));
        }
    }

    fn addition(&mut self) -> Result<Expr, String> {
        let mut left = self.multiplication()?;
        loop {
            let op = if self.eat("+") {
                BinaryOp::Add
            } else if self.eat("-") {
                BinaryOp::Sub
            } else {
                return Ok(left);
            };
            let right = self.multiplication()?;
            left = Expr::Binary(op, Box::new(left), Box::new(right));
        }
    }

    fn multiplication(&mut self) -> Result<Expr, String> {
        let mut left = self.unary()?;
        loop {
            let op = if self.eat("*") {
                BinaryOp::Mul
            } else if self.eat("/") {
                BinaryOp::Div
            } else if self.eat("%") {
                BinaryOp::Rem
            } else {
                return Ok(left);
            };
            let right = self.unary()?;
            left = Expr::Binary(op, Box::new(left), Box::new(right));
        }
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if self.eat("!") {
            let inner = self.unary()?;
            return Ok(Expr::Not(Box::new(inner)));
        }
        if self.eat("-") {
            // A negative numeric literal is folded so that -9223372036854775808 is representable.
            if let Some((Token::Lit(Literal::Int(_) | Literal::Double(_)), _)) = self.tokens.get(self.pos) {
                let inner = self.member()?;
                return Ok(match inner {
                    Expr::Literal(Literal::Int(v)) => Expr::Literal(Literal::Int(-v)),
                    Expr::Literal(Literal::Double(v)) => Expr::Literal(Literal::Double(-v)),
                    other => Expr::Neg(Box::new(other)),
                });
            }
            let inner = self.unary()?;
            return Ok(Expr::Neg(Box::new(inner)));
        }
        self.member()
    }

    fn member(&mut self) -> Result<Expr, String> {
        let mut e = self.primary()?;
        loop {
            if self.eat(".") {
                let name = self.ident()?;
                if self.eat("(") {
                    let args = self.list_until(")")?;
                    e = Expr::Method(Box::new(e), name, args);
                } else {
                    e = Expr::Select(Box::new(e), name);
                }
            } else if self.eat("[") {
                let index = self.expr()?;
                self.expect("]")?;
                e = Expr::Index(Box::new(e), Box::new(index));
            } else {
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
        let Some((tok, at)) = self.tokens.get(self.pos).cloned() else {
            return Err("Syntax error: the expression ended unexpectedly".into());
        };
        self.pos += 1;
        match tok {
            Token::Lit(l) => Ok(Expr::Literal(l)),
            Token::Ident(name) => {
                if self.eat("(") {
                    let args = self.list_until(")")?;
                    Ok(Expr::Call(name, args))
                } else {
                    Ok(Expr::Ident(name))
                }
            }
            Token::Punct("(") => {
                let e = self.expr()?;
                self.expect(")")?;
                Ok(e)
            }
            Token::Punct("[") => Ok(Expr::List(self.list_until("]")?)),
            Token::Punct("{") => {
                let mut entries = Vec::new();
                if self.eat("}") {
                    return Ok(Expr::Map(entries));
                }
                loop {
                    let k = self.expr()?;
                    self.expect(":")?;
                    let v = self.expr()?;
                    entries.push((k, v));
                    if self.eat("}") {
                        return Ok(Expr::Map(entries));
                    }
                    self.expect(",")?;
                    if self.eat("}") {
                        return Ok(Expr::Map(entries));
                    }
                }
            }
            t => Err(format!(
                "Syntax error: unexpected {} at offset {at}",
                describe(&t)
            )),
        }
    }
}

#[cfg(test)]
mod tests {
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
    fn rejects_bad_syntax() {
        for bad in ["a ==", "(a", "a.", "1 +* 2", "if", "a = b", "'open"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
