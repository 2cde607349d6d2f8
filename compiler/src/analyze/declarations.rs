//! `table` declarations: checks them (known types, no duplicate tables or columns) and turns
//! them into schemas for the catalog, which reads schema-less files (`.tbl`) with them and checks
//! that self-describing files (Parquet) agree with them.

use tessera_grammar::ast::{self, Item};
use tessera_grammar::{closest_name, Diagnostic};
use tessera_storage::{DataType, DecimalType, Field, Schema};

/// A table declared in a script.
#[derive(Clone, Debug, PartialEq)]
pub struct DeclaredTable {
    pub name: String,
    pub schema: Schema,
}

/// The tables a script declares, or every error in the declarations.
pub fn declared_tables(script: &ast::Script) -> Result<Vec<DeclaredTable>, Vec<Diagnostic>> {
    let mut tables: Vec<(DeclaredTable, &ast::TableDecl)> = Vec::new();
    let mut errors = Vec::new();
    for item in &script.items {
        let Item::Table(decl) = item else { continue };
        if let Some((_, earlier)) = tables.iter().find(|(t, _)| t.name == decl.name.name) {
            errors.push(
                Diagnostic::name(
                    decl.name.span,
                    format!("table `{}` is declared twice", decl.name.name),
                )
                .with_label("declared again here")
                .with_secondary(earlier.name.span, "first declared here"),
            );
            continue;
        }
        match table_schema(decl) {
            Ok(schema) => tables.push((
                DeclaredTable {
                    name: decl.name.name.clone(),
                    schema,
                },
                decl,
            )),
            Err(mut e) => errors.append(&mut e),
        }
    }
    if errors.is_empty() {
        Ok(tables.into_iter().map(|(t, _)| t).collect())
    } else {
        Err(errors)
    }
}

fn table_schema(decl: &ast::TableDecl) -> Result<Schema, Vec<Diagnostic>> {
    let mut fields: Vec<Field> = Vec::new();
    let mut errors = Vec::new();
    if decl.columns.is_empty() {
        errors.push(Diagnostic::name(
            decl.name.span,
            format!("table `{}` declares no columns", decl.name.name),
        ));
    }
    for column in &decl.columns {
        if let Some(earlier) = decl
            .columns
            .iter()
            .take_while(|c| !std::ptr::eq(*c, column))
            .find(|c| c.name.name == column.name.name)
        {
            errors.push(
                Diagnostic::name(
                    column.name.span,
                    format!("column `{}` is declared twice", column.name.name),
                )
                .with_label("declared again here")
                .with_secondary(earlier.name.span, "first declared here"),
            );
            continue;
        }
        match resolve_type(&column.ty) {
            Ok(ty) => fields.push(Field::new(&column.name.name, ty).nullable(column.nullable)),
            Err(d) => errors.push(d),
        }
    }
    if errors.is_empty() {
        Ok(Schema::new(fields))
    } else {
        Err(errors)
    }
}

/// Resolves a type as written (`i32`, `date`, `decimal(15, 2)`, ...).
pub(crate) fn resolve_type(ty: &ast::TypeName) -> Result<DataType, Diagnostic> {
    let name = &ty.name;
    if name.name == "decimal" {
        let [precision, scale] = ty.args.as_slice() else {
            return Err(
                Diagnostic::type_error(ty.span, "`decimal` takes its precision and scale")
                    .with_label("as `decimal(15, 2)`: 15 digits, 2 of them after the point"),
            );
        };
        let (precision, scale) = (
            u64::try_from(*precision).unwrap_or(0),
            u64::try_from(*scale).unwrap_or(u64::MAX),
        );
        return DecimalType::new(precision, scale)
            .map(DataType::Decimal)
            .map_err(|reason| Diagnostic::type_error(ty.span, reason));
    }
    let resolved = DataType::from_name(&name.name).ok_or_else(|| {
        let names: Vec<&str> = DataType::ALL
            .map(DataType::base_name)
            .into_iter()
            .chain(["decimal"])
            .collect();
        let mut d = Diagnostic::type_error(name.span, format!("unknown type `{}`", name.name))
            .with_label("not a type");
        d = match closest_name(&name.name, names.iter().copied()) {
            Some(suggestion) => d.with_hint(format!("did you mean `{suggestion}`?")),
            None => d.with_hint(format!("the types are: {}", names.join(", "))),
        };
        d
    })?;
    if !ty.args.is_empty() {
        return Err(Diagnostic::type_error(
            ty.span,
            format!("`{}` takes no arguments", name.name),
        ));
    }
    Ok(resolved)
}
