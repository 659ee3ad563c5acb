//! Reading a JSON document where a whole number written with a fraction (`2034.0`) stands for
//! the integer it is, in one pass. JSON has one number type and JSON Schema's `integer` holds
//! both spellings; serde tells them apart. [`Integral`] is a deserializer over a parsed
//! document that, when the target asks for an integer and the document holds a float without
//! a fraction inside the integer's range, hands the target that integer. Every other request
//! gets the document as it is, so a float a free-form map holds stays a float, and `2.5`,
//! `-1.0` for a `u32` or `1e30` are refused as serde refuses them.

use serde::Deserializer;
use serde::de::value::BorrowedStrDeserializer;
use serde::de::{
    DeserializeSeed, EnumAccess, Error as _, MapAccess, SeqAccess, Unexpected, VariantAccess,
    Visitor,
};
use serde_json::{Error, Map, Value};

/// A deserializer over `value` that reads whole floats as integers where integers are wanted,
/// at every depth.
#[derive(Debug, Clone, Copy)]
pub struct Integral<'a>(pub &'a Value);

impl Integral<'_> {
    /// The float without a fraction this value holds, when it is one: the integer it stands for
    /// as `u64` (not negative) or `i64` (negative).
    fn whole(&self) -> Option<Whole> {
        let Value::Number(number) = self.0 else {
            return None;
        };
        if number.is_u64() || number.is_i64() {
            return None; // already an integer: serde reads it as one
        }
        let float = number
            .as_f64()
            .filter(|f| f.is_finite() && f.fract() == 0.0)?;
        // The casts are exact: the float is whole and inside the integer type's range (2^64,
        // which is `u64::MAX as f64`, is just outside it).
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        if (0.0..u64::MAX as f64).contains(&float) {
            Some(Whole::Unsigned(float as u64))
        } else if (i64::MIN as f64..0.0).contains(&float) {
            Some(Whole::Signed(float as i64))
        } else {
            None
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Whole {
    Unsigned(u64),
    Signed(i64),
}

/// An integer for the visitor: the whole float as its integer, anything else as it is.
fn integer<'de, V: Visitor<'de>>(value: Integral<'de>, visitor: V) -> Result<V::Value, Error> {
    match value.whole() {
        Some(Whole::Unsigned(n)) => visitor.visit_u64(n),
        Some(Whole::Signed(n)) => visitor.visit_i64(n),
        None => value.deserialize_any(visitor),
    }
}

macro_rules! integers {
    ($($method:ident)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
                integer(self, visitor)
            }
        )*
    };
}

impl<'de> Deserializer<'de> for Integral<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(n) => {
                if let Some(u) = n.as_u64() {
                    visitor.visit_u64(u)
                } else if let Some(i) = n.as_i64() {
                    visitor.visit_i64(i)
                } else if let Some(f) = n.as_f64() {
                    visitor.visit_f64(f)
                } else {
                    Err(Error::custom("a number serde cannot read"))
                }
            }
            Value::String(s) => visitor.visit_borrowed_str(s),
            Value::Array(items) => visit_seq(items, visitor),
            Value::Object(map) => visit_map(map, visitor),
        }
    }

    integers!(
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
    );

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.0 {
            Value::String(variant) => visitor.visit_enum(Variant {
                name: variant,
                value: None,
            }),
            Value::Object(map) if map.len() == 1 => match map.iter().next() {
                Some((variant, value)) => visitor.visit_enum(Variant {
                    name: variant,
                    value: Some(value),
                }),
                None => Err(Error::invalid_value(Unexpected::Map, &"one variant")),
            },
            Value::Object(_) => Err(Error::invalid_value(
                Unexpected::Map,
                &"a map with a single key",
            )),
            other => Err(Error::invalid_type(unexpected(other), &"a string or a map")),
        }
    }

    serde::forward_to_deserialize_any! {
        bool f32 f64 char str string bytes byte_buf seq tuple tuple_struct map struct
        identifier ignored_any
    }
}

/// What `value` is, for an error.
fn unexpected(value: &Value) -> Unexpected<'_> {
    match value {
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(_) => Unexpected::Other("number"),
        Value::String(s) => Unexpected::Str(s),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    }
}

fn visit_seq<'de, V: Visitor<'de>>(items: &'de [Value], visitor: V) -> Result<V::Value, Error> {
    let mut seq = Items {
        items: items.iter(),
    };
    let value = visitor.visit_seq(&mut seq)?;
    match seq.items.len() {
        0 => Ok(value),
        _ => Err(Error::invalid_length(items.len(), &"fewer elements")),
    }
}

fn visit_map<'de, V: Visitor<'de>>(
    map: &'de Map<String, Value>,
    visitor: V,
) -> Result<V::Value, Error> {
    let mut entries = Entries {
        entries: map.iter(),
        value: None,
    };
    let value = visitor.visit_map(&mut entries)?;
    match entries.entries.len() {
        0 => Ok(value),
        _ => Err(Error::invalid_length(map.len(), &"fewer entries")),
    }
}

struct Items<'de> {
    items: std::slice::Iter<'de, Value>,
}

impl<'de> SeqAccess<'de> for Items<'de> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        self.items
            .next()
            .map(|item| seed.deserialize(Integral(item)))
            .transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

struct Entries<'de> {
    entries: serde_json::map::Iter<'de>,
    value: Option<&'de Value>,
}

impl<'de> MapAccess<'de> for Entries<'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        self.value = Some(value);
        seed.deserialize(BorrowedStrDeserializer::new(key))
            .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        match self.value.take() {
            Some(value) => seed.deserialize(Integral(value)),
            None => Err(Error::custom("a map value asked for before its key")),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

/// An enum's variant: its name, and what it holds (`None` for a unit variant written as a
/// string).
struct Variant<'de> {
    name: &'de str,
    value: Option<&'de Value>,
}

impl<'de> EnumAccess<'de> for Variant<'de> {
    type Error = Error;
    type Variant = Self;

    fn variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<(T::Value, Self), Error> {
        let name = BorrowedStrDeserializer::<Error>::new(self.name);
        Ok((seed.deserialize(name)?, self))
    }
}

impl<'de> VariantAccess<'de> for Variant<'de> {
    type Error = Error;

    fn unit_variant(self) -> Result<(), Error> {
        match self.value {
            None | Some(Value::Null) => Ok(()),
            Some(other) => Err(Error::invalid_type(unexpected(other), &"a unit variant")),
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, Error> {
        match self.value {
            Some(value) => seed.deserialize(Integral(value)),
            None => Err(Error::invalid_type(
                Unexpected::UnitVariant,
                &"a newtype variant",
            )),
        }
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Some(Value::Array(items)) => visit_seq(items, visitor),
            Some(other) => Err(Error::invalid_type(unexpected(other), &"a tuple variant")),
            None => Err(Error::invalid_type(
                Unexpected::UnitVariant,
                &"a tuple variant",
            )),
        }
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.value {
            Some(Value::Object(map)) => visit_map(map, visitor),
            Some(other) => Err(Error::invalid_type(unexpected(other), &"a struct variant")),
            None => Err(Error::invalid_type(
                Unexpected::UnitVariant,
                &"a struct variant",
            )),
        }
    }
}
