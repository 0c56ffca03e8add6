//! Closed label sets defined once: [`label_set!`] makes an enum whose full list
//! (`ALL`), count (`COUNT`), names (`as_str`), position (`index`), parsing
//! (`FromStr`) and serde names all come from one list of `Variant = "name"`
//! pairs, so no variant can be missing from a metrics index or spelt two ways.

/// A fieldless enum of bounded label values.
///
/// ```
/// saltsight::label_set! {
///     /// Colours.
///     #[derive(Debug, Clone, Copy, PartialEq, Eq)]
///     pub enum Colour { Red = "red", DarkBlue = "dark_blue" }
/// }
/// assert_eq!(Colour::ALL, [Colour::Red, Colour::DarkBlue]);
/// assert_eq!(Colour::DarkBlue.as_str(), "dark_blue");
/// assert_eq!(Colour::DarkBlue.index(), 1);
/// assert_eq!("red".parse::<Colour>(), Ok(Colour::Red));
/// assert_eq!(serde_json::to_string(&Colour::Red).unwrap(), "\"red\"");
/// ```
#[macro_export]
macro_rules! label_set {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $name {
            /// Every value, in declaration order (`index` is the position here).
            pub const ALL: [$name; [$($name::$variant),+].len()] = [$($name::$variant),+];
            /// How many values there are (the size of an array indexed by `index`).
            pub const COUNT: usize = Self::ALL.len();

            /// The value's name (a metrics label value, and its serde form).
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $text ),+
                }
            }

            /// Its position in `ALL`: always below `COUNT`.
            pub const fn index(self) -> usize {
                self as usize
            }

            /// Every name, in `ALL`'s order.
            pub const NAMES: [&'static str; [$($text),+].len()] = [$($text),+];
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::label::UnknownLabel;

            fn from_str(text: &str) -> Result<Self, Self::Err> {
                match text {
                    $( $text => Ok($name::$variant), )+
                    _ => Err($crate::label::UnknownLabel {
                        set: stringify!($name),
                        value: text.to_owned(),
                    }),
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = <::std::borrow::Cow<'de, str> as ::serde::Deserialize>::deserialize(d)?;
                text.parse().map_err(::serde::de::Error::custom)
            }
        }
    };
}

/// A name that is not one of the set's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not a {set}")]
pub struct UnknownLabel {
    pub set: &'static str,
    pub value: String,
}

#[cfg(test)]
mod tests {
    crate::label_set! {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum Kind { A = "a", Bee = "b.ee", Sea = "sea" }
    }

    #[test]
    fn names_indexes_and_serde_come_from_one_list() {
        assert_eq!(Kind::COUNT, 3);
        assert_eq!(Kind::NAMES, ["a", "b.ee", "sea"]);
        for (i, k) in Kind::ALL.iter().enumerate() {
            assert_eq!(k.index(), i);
            assert_eq!(k.as_str().parse::<Kind>(), Ok(*k));
            let json = serde_json::to_string(k).unwrap();
            assert_eq!(serde_json::from_str::<Kind>(&json).unwrap(), *k);
        }
        let err = "nope".parse::<Kind>().unwrap_err();
        assert_eq!(err.to_string(), "\"nope\" is not a Kind");
    }
}
