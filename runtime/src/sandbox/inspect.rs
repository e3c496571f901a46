//! What a file is, read from its bytes before anything is compiled: a core
//! module or garbage (refused), a component of the contract, or a plain
//! component (its exports, as WIT, become tools); and which of its imports
//! the sandbox does not provide. Decoding the component's type takes
//! milliseconds where compiling a JavaScript or Python component takes tens
//! of seconds, so a file that cannot load is refused before its compile.
//!
//! Invariants:
//! - Nothing here runs or compiles guest code: it is wasmparser's
//!   validation of the component's structure and types (function bodies
//!   are not validated here; the compiler does that).
//! - A component whose type cannot be decoded here but that wasmtime
//!   accepts is still tried against the contract, so this module can only
//!   add refusals of files that would fail anyway, and plain tools.

use wit_parser::decoding::{DecodedWasm, decode};
use wit_parser::{Resolve, WorldId, WorldItem, WorldKey};

use super::LoadError;
use super::contract::Version;
use super::engine::{PROVIDED_INTERFACES, check_component_header};
use super::plain::docs;

/// The name under which a component of the contract exports its tools.
const CONTRACT_INTERFACE: &str = "toolcage:tool/tool";

/// What the bytes of a file are.
pub(super) enum Inspected {
    /// Exports `toolcage:tool/tool`, of a version this host serves (or
    /// the export's name, of a version it does not).
    Contract(Result<Version, String>),
    /// Any other component, with its WIT.
    Plain(Box<Resolve>, WorldId),
    /// A component whose type could not be decoded here (the reason);
    /// compiled and tried against the contract.
    Undecoded(String),
}

/// An import the sandbox does not provide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// The import as the component names it (`wasi:config/store@0.2.0-rc.1`).
    pub name: String,
}

/// The longest function or module name a component's core modules may
/// carry in their `name` sections. wasmtime copies the function name of
/// every frame of a trap's backtrace (up to 20) and prints the module's
/// name beside each, so a guest that named its recursing function with
/// 20 MB made one trapping call take 1.3 GB of host memory; at this cap a
/// trap copies at most about 1.3 MB. Rust's longest mangled names are a
/// few KiB.
pub const MAX_NAME_BYTES: usize = 64 * 1024;

/// Refuse a component whose core modules name a function or module with
/// more than [`MAX_NAME_BYTES`]. Reads the custom `name` sections only,
/// in the order wasmtime does, and stops where wasmtime stops: at the
/// first entry it cannot parse (wasmtime keeps the names before it and
/// ignores the rest).
pub(super) fn check_names(bytes: &[u8]) -> Result<(), LoadError> {
    use wasmparser::{KnownCustom, Name, Parser, Payload};
    let too_long = |what: &str, name: &str| {
        Err(LoadError::NotAComponent(format!(
            "names a {what} with {} bytes in a `name` section; toolcage loads names of at most \
             {MAX_NAME_BYTES} bytes (every frame of a trap's backtrace copies its name)",
            name.len()
        )))
    };
    for payload in Parser::new(0).parse_all(bytes) {
        // A file wasmparser cannot read, wasmtime cannot compile.
        let Ok(Payload::CustomSection(section)) = payload else {
            continue;
        };
        let KnownCustom::Name(names) = section.as_known() else {
            continue;
        };
        for subsection in names {
            match subsection {
                Ok(Name::Module { name, .. }) if name.len() > MAX_NAME_BYTES => {
                    return too_long("module", name);
                }
                Ok(Name::Function(map)) => {
                    for naming in map {
                        let Ok(naming) = naming else { break };
                        if naming.name.len() > MAX_NAME_BYTES {
                            return too_long("function", naming.name);
                        }
                    }
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    }
    Ok(())
}

/// The most branch points one function may hold: `loop`, `if`, `else`,
/// `br`, `br_if`, `br_table`, the `br_on_*` and exception-handling
/// instructions, each of which starts or ends a block of Cranelift's
/// control-flow graph. Compile time grows faster than their number in one
/// function: 50,000 nested `loop`s (a 150 KB file) took 15 s of CPU and
/// 1.1 GB to compile, 200,000 took 137 s and 4.1 GB; 20,000 take about 5 s
/// and 460 MB. The largest function found in real components (the
/// StarlingMonkey interpreter inside every componentize-js component) has
/// about 7,000; CPython's (componentize-py) about 5,500.
pub const MAX_FUNCTION_BRANCHES: u32 = 20_000;

/// The most locals one function may declare. Locals live across a loop
/// cost the register allocator quadratically: 40,000 of them took 5.7 s to
/// compile, 10,000 0.2 s. Real compilers emit at most a few hundred (594
/// in the largest found); the validator's own limit is 50,000.
pub const MAX_FUNCTION_LOCALS: u32 = 10_000;

/// Refuse a component with a core function (in any of its core modules,
/// nested ones included) that has more than [`MAX_FUNCTION_BRANCHES`]
/// branch points or [`MAX_FUNCTION_LOCALS`] locals, before compiling it.
/// One pass over the code sections, no allocation per operator (the
/// reader's frame stack is reused from function to function); a body that
/// cannot be read is left to the compiler, which refuses it.
pub(super) fn check_functions(bytes: &[u8]) -> Result<(), LoadError> {
    use wasmparser::{Encoding, Operator, OperatorsReader, Parser, Payload, TypeRef};
    let refuse = |module: u32, function: u32, what: String, cap: u32| {
        Err(LoadError::NotAComponent(format!(
            "core module {module}'s function {function} {what}; toolcage compiles functions \
             with at most {cap} (the compiler's time grows faster than their number)"
        )))
    };
    // The core module being read (counted from 0 in the order of the
    // file), its imported functions and the bodies read so far: a body's
    // function index is the imports plus its position.
    let (mut module, mut imported, mut defined) = (None::<u32>, 0u32, 0u32);
    let mut allocations = Default::default();
    for payload in Parser::new(0).parse_all(bytes) {
        match payload {
            Ok(Payload::Version {
                encoding: Encoding::Module,
                ..
            }) => {
                module = Some(module.map_or(0, |m| m + 1));
                (imported, defined) = (0, 0);
            }
            Ok(Payload::ImportSection(imports)) => {
                for import in imports.into_imports() {
                    let Ok(import) = import else { break };
                    if matches!(import.ty, TypeRef::Func(_) | TypeRef::FuncExact(_)) {
                        imported += 1;
                    }
                }
            }
            Ok(Payload::CodeSectionEntry(body)) => {
                let (m, function) = (module.unwrap_or(0), imported + defined);
                defined += 1;
                let mut locals = 0u64;
                if let Ok(reader) = body.get_locals_reader() {
                    for declared in reader {
                        let Ok((count, _)) = declared else { break };
                        locals += u64::from(count);
                    }
                }
                if locals > u64::from(MAX_FUNCTION_LOCALS) {
                    let what = format!("declares {locals} locals");
                    return refuse(m, function, what, MAX_FUNCTION_LOCALS);
                }
                let Ok(reader) = body.get_binary_reader_for_operators() else {
                    continue;
                };
                let mut operators = OperatorsReader::new_with_allocs(reader, allocations);
                let mut branches = 0u32;
                while !operators.eof() {
                    let Ok(operator) = operators.read() else {
                        break;
                    };
                    if matches!(
                        operator,
                        Operator::Loop { .. }
                            | Operator::If { .. }
                            | Operator::Else
                            | Operator::Br { .. }
                            | Operator::BrIf { .. }
                            | Operator::BrTable { .. }
                            | Operator::BrOnNull { .. }
                            | Operator::BrOnNonNull { .. }
                            | Operator::BrOnCast { .. }
                            | Operator::BrOnCastFail { .. }
                            | Operator::TryTable { .. }
                            | Operator::Try { .. }
                            | Operator::Catch { .. }
                            | Operator::CatchAll
                            | Operator::Delegate { .. }
                    ) {
                        branches += 1;
                        if branches > MAX_FUNCTION_BRANCHES {
                            let what = format!(
                                "has more than {MAX_FUNCTION_BRANCHES} branch points (`loop`, \
                                 `if`, `else`, `br`, `br_if`, `br_table`, …)"
                            );
                            return refuse(m, function, what, MAX_FUNCTION_BRANCHES);
                        }
                    }
                }
                allocations = operators.into_allocations();
            }
            // A file wasmparser cannot read, wasmtime cannot compile.
            Err(_) => break,
            Ok(_) => {}
        }
    }
    Ok(())
}

/// Read what `bytes` are, and which imports would not link.
pub(super) fn inspect(bytes: &[u8]) -> Result<(Inspected, Vec<Missing>), LoadError> {
    check_component_header(bytes)?;
    // The WIT docs section is merged by this module, after decoding.
    let (without_docs, docs) = match docs::split(bytes) {
        Some((rest, docs)) => (Some(rest), Some(docs)),
        None => (None, None),
    };
    let (mut resolve, world) = match decode(without_docs.as_deref().unwrap_or(bytes)) {
        Ok(DecodedWasm::Component(resolve, world)) => (resolve, world),
        Ok(DecodedWasm::WitPackage(..)) => {
            return Err(LoadError::NotAComponent(
                "is a WIT package (types only, no code), not a component".into(),
            ));
        }
        Err(error) => return Ok((Inspected::Undecoded(format!("{error:#}")), Vec::new())),
    };
    if let Some(docs) = &docs
        && !docs::merge(&mut resolve, world, docs)
    {
        tracing::warn!(
            bytes = docs.len(),
            "the component's `package-docs` section could not be read (or is over 1 MiB); its WIT docs are ignored"
        );
    }
    let Some(w) = resolve.worlds.get(world) else {
        return Ok((Inspected::Undecoded("no world".into()), Vec::new()));
    };
    // Types in a world's imports are its own type definitions, not
    // something to link.
    let missing = w
        .imports
        .iter()
        .filter(|(_, item)| !matches!(item, WorldItem::Type { .. }))
        .filter_map(|(key, _)| key_name(&resolve, key))
        .filter(|name| !provided(name))
        .map(|name| Missing { name })
        .collect();
    let contract = w
        .exports
        .keys()
        .filter_map(|key| key_name(&resolve, key))
        .find(|name| unversioned(name) == CONTRACT_INTERFACE);
    let inspected = match contract {
        Some(name) => Inspected::Contract(Version::of_export(&name).ok_or(name)),
        None => Inspected::Plain(Box::new(resolve), world),
    };
    Ok((inspected, missing))
}

/// The name of a world import or export as the component spells it: the
/// kebab name, or the interface's `ns:pkg/name@version`.
pub(super) fn key_name(resolve: &Resolve, key: &WorldKey) -> Option<String> {
    match key {
        WorldKey::Name(name) => Some(name.clone()),
        WorldKey::Interface(id) => resolve.id_of(*id),
    }
}

/// `name` without its `@version`.
pub(super) fn unversioned(name: &str) -> &str {
    name.split_once('@').map_or(name, |(name, _)| name)
}

/// Whether the sandbox's linker provides import `name` (an interface, at a
/// version it serves). A world-level function import (a bare kebab name)
/// is never provided.
fn provided(name: &str) -> bool {
    let (interface, version) = match name.split_once('@') {
        Some((interface, version)) => (interface, Some(version)),
        None => (name, None),
    };
    PROVIDED_INTERFACES.iter().any(|(provided, major)| {
        *provided == interface && version.is_none_or(|v| v.starts_with(major))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A core module whose `name` section names the module `module` and
    /// function 0 `function`.
    fn named(module: &str, function: &str) -> Vec<u8> {
        let mut functions = wasm_encoder::NameMap::new();
        functions.append(0, function);
        let mut names = wasm_encoder::NameSection::new();
        names.module(module);
        names.functions(&functions);
        let mut bytes = wasm_encoder::Module::new();
        bytes.section(&names);
        bytes.finish()
    }

    #[test]
    fn names_longer_than_the_cap_are_refused() {
        let at_cap = "f".repeat(MAX_NAME_BYTES);
        let over = "f".repeat(MAX_NAME_BYTES + 1);
        assert!(check_names(&named("m", &at_cap)).is_ok());
        assert!(check_names(&named(&at_cap, "f")).is_ok());
        let Err(LoadError::NotAComponent(message)) = check_names(&named("m", &over)) else {
            panic!("a long function name was not refused");
        };
        assert!(message.contains("function with 65537 bytes"), "{message}");
        let Err(LoadError::NotAComponent(message)) = check_names(&named(&over, "f")) else {
            panic!("a long module name was not refused");
        };
        assert!(message.contains("module with 65537 bytes"), "{message}");
    }

    /// A core module importing `imports` functions and defining one whose
    /// body is `loops` sequential empty loops, with `locals` i32 locals.
    fn with_function(imports: u32, loops: u32, locals: u32) -> wasm_encoder::Module {
        use wasm_encoder::{
            BlockType, CodeSection, EntityType, Function, FunctionSection, ImportSection,
            Instruction, TypeSection, ValType,
        };
        let mut types = TypeSection::new();
        types.ty().function([], []);
        let mut import_section = ImportSection::new();
        for i in 0..imports {
            import_section.import("host", &format!("f{i}"), EntityType::Function(0));
        }
        let mut functions = FunctionSection::new();
        functions.function(0);
        let mut body = Function::new([(locals, ValType::I32)]);
        for _ in 0..loops {
            body.instruction(&Instruction::Loop(BlockType::Empty));
            body.instruction(&Instruction::End);
        }
        body.instruction(&Instruction::End);
        let mut code = CodeSection::new();
        code.function(&body);
        let mut module = wasm_encoder::Module::new();
        module.section(&types);
        if imports > 0 {
            module.section(&import_section);
        }
        module.section(&functions);
        module.section(&code);
        module
    }

    fn refusal(bytes: &[u8]) -> String {
        match check_functions(bytes) {
            Err(LoadError::NotAComponent(message)) => message,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn functions_over_the_caps_are_refused_before_compiling() {
        let at_cap = with_function(0, MAX_FUNCTION_BRANCHES, MAX_FUNCTION_LOCALS);
        assert!(check_functions(&at_cap.finish()).is_ok());

        let message = refusal(&with_function(2, MAX_FUNCTION_BRANCHES + 1, 0).finish());
        assert!(
            message.starts_with("core module 0's function 2 has more than 20000 branch points"),
            "{message}"
        );
        assert!(message.contains("at most 20000"), "{message}");

        let message = refusal(&with_function(0, 0, MAX_FUNCTION_LOCALS + 1).finish());
        assert!(
            message.starts_with("core module 0's function 0 declares 10001 locals"),
            "{message}"
        );
    }

    #[test]
    fn functions_of_every_core_module_are_checked() {
        // A component with a harmless core module, then a hostile one.
        let mut component = wasm_encoder::Component::new();
        component.section(&wasm_encoder::ModuleSection(&with_function(1, 3, 3)));
        component.section(&wasm_encoder::ModuleSection(&with_function(
            1,
            MAX_FUNCTION_BRANCHES + 1,
            0,
        )));
        let message = refusal(&component.finish());
        assert!(
            message.starts_with("core module 1's function 1 has more"),
            "{message}"
        );
    }
}
