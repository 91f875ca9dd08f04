//! The layout engine against rustfmt's layouts.

use super::*;

/// Wrapping keeps the Markdown meaning: quotes repeat their marker, list items indent
/// their continuation, and no wrapped line starts with a word that would open a block.
#[test]
fn doc_wrapping_never_opens_a_block() {
    let words = "lorem ipsum dolor sit amet ".repeat(3);
    let quote = wrap(&format!("> {words}end"), 40);
    assert_eq!(
        quote,
        [
            "> lorem ipsum dolor sit amet lorem ipsum",
            "> dolor sit amet lorem ipsum dolor sit",
            "> amet end"
        ]
    );
    let quoted_list = wrap(&format!("> - {words}"), 40);
    assert_eq!(
        quoted_list,
        [
            "> - lorem ipsum dolor sit amet lorem",
            ">   ipsum dolor sit amet lorem ipsum",
            ">   dolor sit amet"
        ]
    );
    for opener in [
        "-", "1.", "2)", "```", "~~~rust", "#", ">", "|", "===", "<div>",
    ] {
        // The opener falls at every possible break position in turn.
        for room in 20..40 {
            let line = format!("lorem ipsum dolor sit amet {opener} {words}");
            let wrapped = wrap(&line, room);
            assert_eq!(wrapped.join(" "), line.trim_end(), "{opener} at {room}");
            assert!(
                wrapped[1..]
                    .iter()
                    .all(|l| !opens_block(l.split(' ').next().unwrap())),
                "{opener} at {room}: {wrapped:?}"
            );
        }
        let wrapped = wrap(&format!("lorem ipsum dolor sit amet {opener} {words}"), 30);
        assert!(
            wrapped[1..]
                .iter()
                .all(|l| !opens_block(l.split(' ').next().unwrap())),
            "{opener}: {wrapped:?}"
        );
    }
}

#[test]
fn lists_stay_on_one_line_when_they_fit() {
    let mut w = Writer::default();
    w.open(cat([
        "fn f".into(),
        parens(["a: u8", "b: u8"]),
        " {".into(),
    ]));
    w.close("}");
    assert_eq!(w.finish(), "fn f(a: u8, b: u8) {\n}\n");
}

#[test]
fn long_lists_break_one_item_per_line_and_nested_lists_only_when_needed() {
    let long = "x".repeat(90);
    let mut w = Writer::default();
    w.open("mod m {");
    w.line(cat([
        "call".into(),
        parens([
            Doc::from(format!("{long}_a")),
            cat(["inner".into(), parens(["1", "2"])]),
        ]),
        "?;".into(),
    ]));
    w.close("}");
    assert_eq!(
        w.finish(),
        format!("mod m {{\n    call(\n        {long}_a,\n        inner(1, 2),\n    )?;\n}}\n")
    );
}

#[test]
fn the_trailing_text_counts_toward_the_width() {
    // 96 columns of call plus `?;` is 98: fits. Two more columns do not.
    let fits = "y".repeat(94);
    let params = |p: &str| list("(", vec![Doc::from(p)], ")");
    let mut w = Writer::default();
    w.line(cat(["f".into(), params(&fits), "?;".into()]));
    assert!(!w.finish().contains("(\n"));
    let too_long = "y".repeat(97);
    let mut w = Writer::default();
    w.line(cat(["f".into(), params(&too_long), "?;".into()]));
    assert_eq!(w.finish(), format!("f(\n    {too_long},\n)?;\n"));
}

#[test]
fn call_arguments_break_past_sixty_columns_and_one_call_overflows() {
    // 59 columns of arguments stay on one line; 61 do not (rustfmt's `fn_call_width`).
    let a = "a".repeat(28);
    let b = "b".repeat(29);
    let mut w = Writer::default();
    w.line(call("f", [a.as_str(), b.as_str()]));
    assert_eq!(w.finish(), format!("f({a}, {b})\n"));
    let b = "b".repeat(31);
    let mut w = Writer::default();
    w.line(call("f", [a.as_str(), b.as_str()]));
    assert_eq!(w.finish(), format!("f(\n    {a},\n    {b},\n)\n"));
    // A lone call argument overflows: the outer brackets hug it and it breaks itself, even
    // though its own arguments would fit.
    let mut w = Writer::default();
    w.line(call("Ok", [call("g", [a.as_str(), "x"])]));
    assert_eq!(w.finish(), format!("Ok(g({a}, x))\n"));
    let long = "c".repeat(58);
    let mut w = Writer::default();
    w.line(call("Ok", [call("g", [long.as_str(), "x"])]));
    assert_eq!(w.finish(), format!("Ok(g(\n    {long},\n    x,\n))\n"));
}

#[test]
fn attributes_break_their_predicate_without_trailing_commas() {
    let mut w = Writer::default();
    w.cfg(Some(
        "all(feature = \"some_long_gpu_feature_name\", not(feature = \"another_long_feature\"))",
    ));
    assert_eq!(
        w.finish(),
        "#[cfg(all(\n    feature = \"some_long_gpu_feature_name\",\n    not(feature = \"another_long_feature\")\n))]\n"
    );
}

#[test]
fn docs_wrap_at_the_line_width_under_list_items() {
    let mut w = Writer::default();
    let words = vec!["word"; 30].join(" ");
    w.doc(&[
        format!("- {words}"),
        "```".to_owned(),
        words.clone(),
        "```".to_owned(),
    ]);
    let out = w.finish();
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines.iter().all(|l| l.len() <= WIDTH || l.contains("word word word word word word word word word word word word word word word word word word word word word word word word word word word word word word")), "{out}");
    assert!(
        lines[0].starts_with("/// - word") && lines[1].starts_with("///   word"),
        "{out}"
    );
    // Inside a code fence nothing is wrapped.
    assert_eq!(lines[lines.len() - 2], format!("/// {words}"));
}

/// A right-hand side that breaks either way moves to the next line when it takes two fewer
/// lines there (rustfmt's `prefer_next_line`): a nested call then hugs its parent.
#[test]
fn a_right_hand_side_moves_down_when_that_saves_lines() {
    let mut w = Writer {
        depth: 3,
        ..Writer::default()
    };
    let inner = call(
        "::scratch::m1030::dispatch::try_b1",
        ["args.optional_float(0)", "args.optional_bool(1).as_ref()"],
    );
    let rhs = cat([call("check::block_on", [inner]), "?".into()]);
    w.assign("let (__out_0, (__out_1, __out_2)) = ", rhs, ";");
    assert_eq!(
        w.finish(),
        "            let (__out_0, (__out_1, __out_2)) =
                check::block_on(::scratch::m1030::dispatch::try_b1(
                    args.optional_float(0),
                    args.optional_bool(1).as_ref(),
                ))?;
"
    );
}

/// A struct literal within `struct_lit_width` stays on one line only when the line has room.
#[test]
fn a_short_struct_literal_breaks_on_a_long_line() {
    let literal = |head: &str| {
        cat([
            format!("{head} ").into(),
            struct_literal(vec!["names: args.int(0)".into()]),
        ])
    };
    let mut w = Writer {
        depth: 3,
        ..Writer::default()
    };
    w.assign("let __arg_1_0 = ", literal("Short::Dense"), ";");
    w.assign(
        "let __arg_1_0 = ",
        literal("::scratch::m1082::ops::DetectionsPrimitive::<Dispatch>::Dense"),
        ";",
    );
    assert_eq!(
        w.finish(),
        "            let __arg_1_0 = Short::Dense { names: args.int(0) };
            let __arg_1_0 = ::scratch::m1082::ops::DetectionsPrimitive::<Dispatch>::Dense {
                names: args.int(0),
            };
"
    );
}
