//! Answers questions about cai's typestrs, element dtypes and layouts as JSON, so that
//! `tests/python/test_numpy_oracle.py` can compare every answer with NumPy's.
//!
//! Input (stdin): `{"typestrs": [...], "layouts": [...]}`. Output (stdout): the answers in the
//! same order, plus `elements`: every scalar Element and the derived structs below. Errors are
//! reported per item, never by exiting, so one bad case cannot hide the others.

use std::io::Read;

use cai_runtime::{DType, DescriptorBuilder, Element, Host, Layout, LayoutError, Order, TypeStr};
use num_complex::Complex;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Deserialize)]
struct Request {
    #[serde(default)]
    typestrs: Vec<String>,
    #[serde(default)]
    layouts: Vec<LayoutCase>,
    #[serde(default)]
    descriptors: Vec<DescriptorCase>,
}

/// A host array of a named element type, exported at a made-up address.
#[derive(Deserialize)]
struct DescriptorCase {
    element: String,
    shape: Vec<usize>,
    order: String,
}

#[derive(Deserialize)]
struct LayoutCase {
    itemsize: usize,
    shape: Vec<usize>,
    #[serde(default)]
    order: String,
    /// Explicit byte strides (any sign, zero included) instead of a contiguous order.
    #[serde(default)]
    strides: Option<Vec<isize>>,
    #[serde(default)]
    ops: Vec<Op>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum Op {
    /// `a.transpose(axes)`
    Transpose(Vec<usize>),
    /// `a.T`
    T,
    /// `a[(slice(None),) * axis + (slice(start, stop, step),)]`
    Slice(usize, Option<isize>, Option<isize>, isize),
    /// `a[(slice(None),) * axis + (index,)]`
    Index(usize, isize),
}

#[derive(Serialize)]
struct LayoutAnswer {
    shape: Vec<usize>,
    strides: Vec<isize>,
    exported_strides: Option<Vec<isize>>,
    c_contiguous: bool,
    f_contiguous: bool,
    offset: isize,
    extent: Option<(isize, isize)>,
}

fn layout(case: &LayoutCase) -> Result<LayoutAnswer, LayoutError> {
    let order = if case.order == "F" {
        Order::F
    } else {
        Order::C
    };
    let mut l = match &case.strides {
        Some(s) => Layout::strided(&case.shape, s, case.itemsize)?,
        None => Layout::contiguous(&case.shape, case.itemsize, order)?,
    };
    let mut offset = 0isize;
    for op in &case.ops {
        let (next, off) = match op {
            Op::Transpose(axes) => (l.permute(axes)?, 0),
            Op::T => (l.transposed(), 0),
            Op::Slice(axis, start, stop, step) => l.slice(*axis, *start, *stop, *step)?,
            Op::Index(axis, i) => l.index(*axis, *i)?,
        };
        l = next;
        offset += off;
    }
    Ok(LayoutAnswer {
        shape: l.shape().to_vec(),
        strides: l.strides().to_vec(),
        exported_strides: l.exported_strides().map(<[isize]>::to_vec),
        c_contiguous: l.is_c_contiguous(),
        f_contiguous: l.is_f_contiguous(),
        offset,
        extent: l.extent().map(|e| (e.lo, e.hi)),
    })
}

fn typestr(s: &str) -> Value {
    match TypeStr::parse(s) {
        Ok(t) => json!({"canonical": t.canonical().to_string(), "itemsize": t.itemsize()}),
        Err(e) => json!({"error": e.to_string()}),
    }
}

// Structured elements; their NumPy declarations are written out independently in the Python
// test, and NumPy computes the aligned layout itself.
#[derive(Clone, Copy, Element)]
#[repr(C)]
struct Point {
    x: f32,
    y: f32,
}

#[derive(Clone, Copy, Element)]
#[repr(C)]
struct Particle {
    id: u8,
    pos: [f64; 3],
    flags: [[u16; 2]; 3],
    alive: bool,
}

#[derive(Clone, Copy, Element)]
#[repr(C)]
struct Nested {
    tag: i8,
    p: Point,
    ps: [Point; 2],
    z: Complex<f64>,
    h: half::f16,
}

#[derive(Clone, Copy, Element)]
#[repr(C)]
struct Tuple(u16, f64, u8);

/// NumPy would name the first gap `f1` and the second `f4`, both taken.
#[derive(Clone, Copy, Element)]
#[repr(C)]
struct Clashing {
    f1: u8,
    x: u32,
    _pad1: u8,
    f4: u16,
}

#[derive(Clone, Copy, Element)]
#[repr(C, packed)]
struct Packed {
    a: u8,
    b: f64,
    c: i32,
}

#[derive(Clone, Copy, Element)]
#[repr(C, align(32))]
struct Aligned {
    a: u32,
    b: u8,
}

fn descriptor(case: &DescriptorCase) -> Value {
    let Some(dtype) = dtype_named(&case.element) else {
        return json!({"error": format!("unknown element {}", case.element)});
    };
    let order = if case.order == "F" {
        Order::F
    } else {
        Order::C
    };
    let nbytes = case.shape.iter().product::<usize>() * dtype.itemsize();
    match DescriptorBuilder::<Host>::new(0x1000, nbytes, dtype, true)
        .shape(case.shape.clone())
        .order(order)
        .build()
    {
        Ok(d) => json!({"literal": d.to_string()}),
        Err(e) => json!({"error": e.to_string()}),
    }
}

fn dtype_named(name: &str) -> Option<&'static DType> {
    Some(match name {
        "bool" => &<bool as Element>::DTYPE,
        "i8" => &<i8 as Element>::DTYPE,
        "u16" => &<u16 as Element>::DTYPE,
        "i64" => &<i64 as Element>::DTYPE,
        "f32" => &<f32 as Element>::DTYPE,
        "f64" => &<f64 as Element>::DTYPE,
        "Complex<f64>" => &<Complex<f64> as Element>::DTYPE,
        "Particle" => &<Particle as Element>::DTYPE,
        "Nested" => &<Nested as Element>::DTYPE,
        _ => return None,
    })
}

fn element<T: Element>(name: &str) -> Value {
    let dt: DType = T::DTYPE;
    json!({
        "rust": name,
        "typestr": dt.typestr().to_string(),
        "descr": dt.descr().to_string(),
        "itemsize": dt.itemsize(),
        "size_of": std::mem::size_of::<T>(),
    })
}

/// `std::any::type_name` without module paths: `f16`, `Complex<f32>`.
fn short_name(full: &str) -> String {
    let mut out = String::new();
    let mut rest = full;
    while let Some(i) = rest.find("::") {
        out.push_str(&rest[..i]);
        let kept = out
            .trim_end_matches(|c: char| c.is_alphanumeric() || c == '_')
            .len();
        out.truncate(kept);
        rest = &rest[i + 2..];
    }
    out.push_str(rest);
    out
}

fn elements() -> Vec<Value> {
    let mut out = Vec::new();
    // Every scalar element type: cai-runtime's one list of them.
    macro_rules! scalar {
        ($kind:ident, $ty:ty $(, $ext:ident)?) => {
            out.push(element::<$ty>(&short_name(std::any::type_name::<$ty>())));
        };
    }
    cai_runtime::for_each_element!(scalar);
    out.extend([
        element::<Point>("Point"),
        element::<Particle>("Particle"),
        element::<Nested>("Nested"),
        element::<Tuple>("Tuple"),
        element::<Clashing>("Clashing"),
        element::<Packed>("Packed"),
        element::<Aligned>("Aligned"),
    ]);
    out
}

fn main() {
    let mut input = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut input) {
        eprintln!("cai-oracle: cannot read stdin: {e}");
        std::process::exit(2);
    }
    let req: Request = match serde_json::from_str(&input) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cai-oracle: bad request: {e}");
            std::process::exit(2);
        }
    };
    let out = json!({
        "typestrs": req.typestrs.iter().map(|s| typestr(s)).collect::<Vec<_>>(),
        "layouts": req.layouts.iter().map(|c| match layout(c) {
            Ok(a) => serde_json::to_value(a).unwrap_or(Value::Null),
            Err(e) => json!({"error": e.to_string()}),
        }).collect::<Vec<_>>(),
        "descriptors": req.descriptors.iter().map(descriptor).collect::<Vec<_>>(),
        "elements": elements(),
    });
    println!("{out}");
}
