//! The input struct as the derives see it: its fields, each with typed attributes.

use syn::spanned::Spanned;

use super::attr::{self, ContainerAttrs, FieldAttrs};
use super::ctxt::Ctxt;

/// A struct to derive for.
pub struct Container<'a> {
    pub ident: &'a syn::Ident,
    pub generics: &'a syn::Generics,
    pub attrs: ContainerAttrs,
    pub fields: Vec<Field<'a>>,
    pub original: &'a syn::DeriveInput,
}

/// One field.
pub struct Field<'a> {
    pub member: syn::Member,
    pub ty: &'a syn::Type,
    pub attrs: FieldAttrs,
    pub original: &'a syn::Field,
}

impl Field<'_> {
    /// The field's name as NumPy would show it (`f0`, `f1`... for tuple fields).
    pub fn numpy_name(&self) -> String {
        match &self.member {
            syn::Member::Named(i) => {
                let s = i.to_string();
                s.strip_prefix("r#").map(str::to_owned).unwrap_or(s)
            }
            syn::Member::Unnamed(i) => format!("f{}", i.index),
        }
    }
}

impl<'a> Container<'a> {
    /// Parses the input; `what` names the derive in messages. `None` when it is no struct
    /// (the error is recorded).
    pub fn from_ast(
        cx: &Ctxt,
        input: &'a syn::DeriveInput,
        what: &str,
        keys: &attr::Keys,
    ) -> Option<Self> {
        let attrs = ContainerAttrs::from_ast(cx, &input.attrs, keys);
        let data = match &input.data {
            syn::Data::Struct(s) => s,
            syn::Data::Enum(e) => {
                cx.error_spanned_by(
                    e.enum_token,
                    format!("#[derive({what})] only supports structs, not enums: derive it on a struct that holds the buffer"),
                );
                return None;
            }
            syn::Data::Union(u) => {
                cx.error_spanned_by(
                    u.union_token,
                    format!("#[derive({what})] only supports structs, not unions: derive it on a struct that holds the buffer"),
                );
                return None;
            }
        };
        let fields = data
            .fields
            .iter()
            .enumerate()
            .map(|(i, f)| Field {
                member: match &f.ident {
                    Some(id) => syn::Member::Named(id.clone()),
                    None => syn::Member::Unnamed(syn::Index {
                        index: i as u32,
                        span: f.ty.span(),
                    }),
                },
                ty: &f.ty,
                attrs: FieldAttrs::from_ast(cx, &f.attrs, keys),
                original: f,
            })
            .collect();
        Some(Container {
            ident: &input.ident,
            generics: &input.generics,
            attrs,
            fields,
            original: input,
        })
    }
}
