//! Syntax errors of the RSL parser (seed 003 §2.2.4): every message, with its line and column.

use coalloc_core::rsl::{parse, Relation, Request, RslValue, MAX_DEPTH};
use coalloc_core::SpecError;

fn err(text: &str) -> String {
    match parse(text) {
        Ok(r) => panic!("{text:?} parsed as {r:?}"),
        Err(e) => {
            assert!(matches!(e, SpecError::Syntax { .. }), "{e:?}");
            e.to_string()
        }
    }
}

#[test]
fn unterminated_double_quote_reports_where_it_starts() {
    assert_eq!(
        err("&(count=4)\n (executable=\"/bin/true)\n"),
        "2:14: unterminated string: this `\"` has no closing `\"`"
    );
}

#[test]
fn unterminated_single_quote_and_user_delimited_string() {
    assert_eq!(
        err("&(a='it''s)"),
        "1:5: unterminated string: this `'` has no closing `'`"
    );
    assert_eq!(
        err("&(a=^/abc)"),
        "1:5: unterminated string: this `^/` has no closing `/`"
    );
    assert_eq!(
        err("&(a=^"),
        "1:5: expected a delimiter character after `^` (found end of input)"
    );
}

#[test]
fn unterminated_comment_reports_where_it_starts() {
    assert_eq!(
        err("&(count=4)\n  (* the workers\n"),
        "2:3: unterminated comment: this `(*` has no closing `*)`"
    );
    // `(*)` opens a comment but does not close it.
    assert_eq!(
        err("(*)&(a=1)"),
        "1:1: unterminated comment: this `(*` has no closing `*)`"
    );
}

#[test]
fn missing_closing_paren_names_the_open_one() {
    assert_eq!(
        err("&(count=4)\n (label=a"),
        "2:10: expected `)` to close the `(` at 2:2 (found end of input)"
    );
    assert_eq!(
        err("&(environment=(A 1)(B 2)"),
        "1:25: expected `)` to close the `(` at 1:2 (found end of input)"
    );
    assert_eq!(
        err("&(environment=(A 1"),
        "1:19: expected `)` to close the `(` at 1:15 (found end of input)"
    );
    assert_eq!(
        err("&(a=1(b=2)"),
        "1:8: expected `)` to close the `(` at 1:6 (found `=`): a value sequence holds no \
         relations; is a `)` missing before that `(`?"
    );
}

#[test]
fn missing_operator() {
    assert_eq!(
        err("&(count 5)"),
        "1:9: expected an operator (`=`, `!=`, `<`, `<=`, `>`, `>=`) after `count` (found `5`)"
    );
    assert_eq!(
        err("&(count)"),
        "1:8: expected an operator (`=`, `!=`, `<`, `<=`, `>`, `>=`) after `count` (found `)`)"
    );
    assert_eq!(
        err("&(memory!64)"),
        "1:9: expected `!=` (found `!` followed by `6`)"
    );
}

#[test]
fn empty_request_lists() {
    assert_eq!(
        err("+"),
        "1:2: expected `(` to start the first request after `+` (found end of input)"
    );
    assert_eq!(
        err("  +\n\n"),
        "3:1: expected `(` to start the first request after `+` (found end of input)"
    );
    assert_eq!(
        err("&(|)"),
        "1:4: expected `(` to start the first request after `|` (found `)`)"
    );
    assert_eq!(
        err(""),
        "1:1: expected a request: `+`, `&`, `|` or a relation such as `count=4` (found end of \
         input)"
    );
    assert_eq!(
        err("&()"),
        "1:3: expected a request: `+`, `&`, `|` or a relation such as `count=4` (found `)`)"
    );
}

#[test]
fn empty_value() {
    assert_eq!(
        err("&(count=)"),
        "1:9: expected a value after `count=` (found `)`)"
    );
    assert_eq!(
        err("&(memory>=\n)"),
        "2:1: expected a value after `memory>=` (found `)`)"
    );
}

#[test]
fn stray_text_after_the_request() {
    assert_eq!(
        err("&(count=1) x"),
        "1:12: expected the end of the specification after the request (found `x`)"
    );
    assert_eq!(
        err("&(count=1))"),
        "1:11: expected the end of the specification after the request (found `)`)"
    );
    assert_eq!(
        err("(count=1)(count=2)"),
        "1:10: expected the end of the specification after the request (found `(`)"
    );
}

#[test]
fn variable_references() {
    assert_eq!(
        err("&(executable=$(URLDIR"),
        "1:22: expected `)` to close the `$(` at 1:14 (found end of input)"
    );
    assert_eq!(
        err("&(executable=$(URLDIR x)"),
        "1:23: expected `)` to close the `$(` at 1:14 (found `x`)"
    );
    assert_eq!(
        err("&(executable=$()"),
        "1:16: expected a variable name after `$(` (found `)`)"
    );
    assert_eq!(
        err("&(executable=$URLDIR)"),
        "1:14: expected `(` after `$` to start a variable reference `$(NAME)` (found `U`)"
    );
}

#[test]
fn concatenation_operator() {
    assert_eq!(
        err("&(a=b # )"),
        "1:9: expected a string or `$(NAME)` after `#` (found `)`)"
    );
    assert_eq!(
        err("&(a=(b c) # d)"),
        "1:11: `#` joins two strings or `$(NAME)` references: write one on each side (a \
         sequence cannot be joined)"
    );
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let n = 100_000;
    let requests = format!("{}a=1{}", "&(".repeat(n), ")".repeat(n));
    let col = 2 * MAX_DEPTH + 2; // the `(` that opens level MAX_DEPTH + 1
    assert_eq!(
        err(&requests),
        format!("1:{col}: nesting deeper than 200 levels of parentheses")
    );
    let values = format!("&(a={}x{})", "(".repeat(n), ")".repeat(n));
    assert_eq!(
        err(&values),
        "1:204: nesting deeper than 200 levels of parentheses"
    );
    let wrapped = format!("{}&(a=1){}", "(".repeat(n), ")".repeat(n));
    assert_eq!(
        err(&wrapped),
        "1:201: nesting deeper than 200 levels of parentheses"
    );
}

#[test]
fn nesting_up_to_the_limit_is_fine() {
    let depth = MAX_DEPTH;
    let text = format!("{}a=1{}", "&(".repeat(depth), ")".repeat(depth));
    let mut expected = Request::Relation(Relation::new(
        "a",
        coalloc_core::model::RelOp::Eq,
        vec![RslValue::lit("1")],
    ));
    for _ in 0..depth {
        expected = Request::And(vec![expected]);
    }
    assert_eq!(parse(&text).map(|r| r.erase_positions()), Ok(expected));
}

#[test]
fn columns_count_characters_not_bytes() {
    assert_eq!(
        err("&(label=\"é\")(ünïcode 1)"),
        "1:22: expected an operator (`=`, `!=`, `<`, `<=`, `>`, `>=`) after `ünïcode` (found \
         `1`)"
    );
}
