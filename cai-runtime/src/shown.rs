//! How a user's value appears in an error message: its `Debug` form, cut at 80 characters as
//! `repr()` of Python values is in the Python messages. Every error type formats values
//! through [`Shown`].

use std::fmt;

/// The longest a value is shown in a message, in characters; a longer one is cut to
/// `SHOWN_MAX - 3` and `...`, as `repr()` of Python values is in the Python messages.
const SHOWN_MAX: usize = 80;

/// `text` cut to [`SHOWN_MAX`] characters (the last three `...`) where it is longer, so that a
/// huge bad value is named, not repeated whole, in its error.
pub(crate) fn shorten(text: &str) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(SHOWN_MAX) {
        None => text.into(),
        Some(_) => {
            let cut = text
                .char_indices()
                .nth(SHOWN_MAX - 3)
                .map_or(text.len(), |(i, _)| i);
            format!("{}...", &text[..cut]).into()
        }
    }
}

/// A user's value in a message: its `Debug` form (a string in quotes, a list in brackets),
/// shortened (`shorten`).
pub struct Shown<'a, T: ?Sized>(pub &'a T);

impl<T: fmt::Debug + ?Sized> fmt::Display for Shown<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Formatting stops once `shorten` has enough to decide: the message of a layout of a
        // million entries costs what one of a hundred does.
        let mut head = Head(String::new());
        // An error here is `Head` saying it is full (or the value's own `Debug` failing):
        // either way what was written so far is what is shown.
        let _ = fmt::write(&mut head, format_args!("{:?}", self.0));
        f.write_str(&shorten(&head.0))
    }
}

/// The first `SHOWN_MAX + 1` characters written to it: enough for [`shorten`] to tell a value
/// that fits from one it must cut. Writing more fails, which ends the formatting.
struct Head(String);

impl fmt::Write for Head {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = SHOWN_MAX + 1 - self.0.chars().count();
        match s.char_indices().nth(room) {
            None => {
                self.0.push_str(s);
                Ok(())
            }
            Some((end, _)) => {
                self.0.push_str(&s[..end]);
                Err(fmt::Error)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{SHOWN_MAX, Shown, shorten};

    #[test]
    fn short_values_are_whole_and_long_ones_cut_at_a_character() {
        assert_eq!(Shown("gpu").to_string(), r#""gpu""#);
        let exact = "x".repeat(SHOWN_MAX);
        assert_eq!(shorten(&exact), exact);
        // (Far over the limit. Miri runs this test: the 50,000 items it once formatted whole
        // took it 200 s.)
        let long = "é".repeat(2_000); // two bytes a character: the cut is at a char boundary
        let cut = shorten(&long);
        assert_eq!(cut.chars().count(), SHOWN_MAX);
        assert!(cut.ends_with("é...") && cut.starts_with('é'));
        let list = Shown(&vec![7usize; 2_000]).to_string();
        assert_eq!(list.chars().count(), SHOWN_MAX);
        assert!(list.starts_with("[7, 7,") && list.ends_with("..."));
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "safe code only, and Miri takes minutes over the escaping of these characters"
    )]
    fn the_cut_falls_where_the_whole_texts_would() {
        // Texts of about the limit's length, in characters of one to four bytes, written in
        // one piece or many (a list writes each item and each ", " on its own).
        fn cut_as_whole<T: std::fmt::Debug + ?Sized>(value: &T) {
            let whole = shorten(&format!("{value:?}")).into_owned();
            assert_eq!(Shown(value).to_string(), whole, "{value:?}");
        }
        for c in ["x", "é", "€", "𝄞"] {
            for n in SHOWN_MAX - 3..=SHOWN_MAX + 3 {
                cut_as_whole(c.repeat(n).as_str()); // `"` + n + `"`
            }
            for n in 15..=18 {
                cut_as_whole(&vec![c; n]); // 5n: `["x", "x"]`
            }
        }
        for n in 25..=28 {
            cut_as_whole(&vec![7u8; n]); // 3n: `[7, 7]`
        }
    }

    #[test]
    fn a_huge_value_is_formatted_no_further_than_shown() {
        // A Debug that counts what it is asked to write, and would write a great deal.
        struct Endless(std::cell::Cell<usize>);
        impl std::fmt::Debug for Endless {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                for _ in 0..1_000_000 {
                    self.0.set(self.0.get() + 1);
                    f.write_str("ab")?;
                }
                Ok(())
            }
        }
        let e = Endless(0.into());
        assert_eq!(
            Shown(&e).to_string(),
            format!("{}...", &"ab".repeat(40)[..77])
        );
        assert_eq!(e.0.get(), 41); // the write of characters 81 and 82 failed, and ended it
    }
}
