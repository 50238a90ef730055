#!/usr/bin/env node
// The repository's structure (architecture sections 2 and 13). Fails (exit 1)
// on any of:
//   upward-import    a package imports a package of a later layer. Layers, in
//                    order: core < wire < persistence < projection < query <
//                    subagent < host < interop < apps (folders
//                    packages/<layer>/<pkg> and apps/*). A package may import
//                    its own layer and earlier ones. Checked on `dependencies`,
//                    `peerDependencies`, `optionalDependencies` and every
//                    import in src/. Tests and devDependencies may reach up
//                    (a client's tests start the real server), and bench/ and
//                    tooling/ sit outside the layering: they may import
//                    anything public, and no layered src imports them.
//   unknown-layer    a package folder under packages/ that is not a layer.
//   internal-import  an import of another package's internals: a workspace
//                    package is imported by its name or one of its `exports`
//                    subpaths only (no `@dsh/x/src/...`, no `@dsh/x/dist/...`),
//                    and no relative path leaves the importing package's folder.
//   file-cycle       files that import each other, directly or around a loop,
//                    by relative imports. Type-only imports count: they run
//                    nothing, but they tie the modules together just the same.
//   package-cycle    workspace packages that depend on each other around a
//                    loop (any manifest section, any import in any file).
//   file-length      a file over 600 lines (source and test files alike; the
//                    report says which).
//   unparsable       a file the parser rejects (its imports cannot be checked).
//
// Files checked in each workspace package: src/, tests/ and scripts/ (any
// depth), and the package's top-level modules except tool configs
// (`*.config.*`, which reach the shared preset by path). Imports are read by a
// real parser (oxc, through rolldown, which the workspace already uses for
// bundling): static, `import type`, re-exports, `import()`, `import('x').T`
// types, `require()`, `import x = require()`, and `declare module 'x'`
// augmentations (a package edge, not a file edge).
//
// Usage: node tooling/scripts/check-structure.mjs [root] [--json]
//   root defaults to this repository; it must hold a pnpm-workspace.yaml.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve, sep } from 'node:path'
import { parseAst } from 'rolldown/parseAst'
import { repoRoot, workspacePackages } from './workspace.mjs'

export const LAYERS = ['core', 'wire', 'persistence', 'projection', 'query', 'subagent', 'host', 'interop', 'apps']
export const MAX_LINES = 600

const SOURCE = /\.(c|m)?(t|j)sx?$/
const CONFIG = /\.config\.(c|m)?(t|j)s$/
const SCANNED_DIRS = ['src', 'tests', 'scripts']
const SKIPPED_DIRS = new Set(['node_modules', 'dist', '.turbo'])
const MANIFEST_SECTIONS = ['dependencies', 'peerDependencies', 'optionalDependencies', 'devDependencies']
const LAYERED_SECTIONS = new Set(['dependencies', 'peerDependencies', 'optionalDependencies'])
const LAYER_ORDER = LAYERS.join(' < ')

const posix = (path) => path.split(sep).join('/')

/** Every violation under the workspace at `root`, and what was looked at. */
export function checkStructure(root = repoRoot) {
  const absRoot = resolve(root)
  const packages = workspacePackages(absRoot).map((entry) => loadPackage(absRoot, entry))
  const byName = new Map(packages.map((pkg) => [pkg.name, pkg]))
  const violations = []
  for (const pkg of packages) {
    violations.push(...pkg.problems)
    violations.push(...layerViolations(pkg, byName))
    violations.push(...internalViolations(absRoot, pkg, byName))
    for (const file of pkg.files) {
      if (file.lines > MAX_LINES)
        violations.push({
          rule: 'file-length',
          file: file.path,
          line: MAX_LINES + 1,
          kind: file.kind,
          message: `${file.kind} file has ${file.lines} lines (limit ${MAX_LINES})`,
          fix:
            file.kind === 'test'
              ? 'split the spec by behaviour into several files (shared setup into a tests/support module)'
              : 'split the module along a seam it already has (one concern per file), re-exported from index.ts if public',
        })
    }
  }
  violations.push(...fileCycles(absRoot, packages))
  violations.push(...packageCycles(packages, byName))
  violations.sort((a, b) => a.file.localeCompare(b.file) || a.line - b.line || a.rule.localeCompare(b.rule))
  return { root: absRoot, packages: packages.length, files: packages.reduce((n, pkg) => n + pkg.files.length, 0), violations }
}

function loadPackage(root, { dir, manifest }) {
  const relDir = posix(dir)
  const manifestPath = `${relDir}/package.json`
  const manifestText = readFileSync(join(root, dir, 'package.json'), 'utf8')
  const problems = []
  let layer = null
  const parts = relDir.split('/')
  if (parts[0] === 'apps') layer = 'apps'
  else if (parts[0] === 'packages') {
    layer = parts.length === 3 ? parts[1] : `${parts.slice(1).join('/')}`
    if (parts.length !== 3 || !LAYERS.includes(layer) || layer === 'apps')
      problems.push({
        rule: 'unknown-layer',
        file: manifestPath,
        line: 1,
        message: `${manifest.name} sits in packages/${parts.slice(1, -1).join('/')}/, which is not a layer (${LAYER_ORDER})`,
        fix: `move the package to packages/<layer>/${parts.at(-1)} for the layer its imports put it in`,
      })
  }
  const files = []
  for (const abs of packageFiles(join(root, dir))) {
    const path = posix(relative(root, abs))
    const text = readFileSync(abs, 'utf8')
    const inPackage = posix(relative(join(root, dir), abs))
    const kind = /(^|\/)tests?\//.test(inPackage) || /\.(spec|test)\.(c|m)?(t|j)sx?$/.test(inPackage) ? 'test' : 'source'
    const file = { abs, path, kind, inSrc: inPackage.startsWith('src/'), lines: lineCount(text), imports: [] }
    try {
      file.imports = importsOf(text, abs)
    } catch (error) {
      problems.push({
        rule: 'unparsable',
        file: path,
        line: 1,
        message: `the parser rejects this file, so its imports cannot be checked: ${String(error.message ?? error).split('\n')[0]}`,
        fix: 'fix the syntax error (npx tsc -p tsconfig.json --noEmit in the package names it)',
      })
    }
    files.push(file)
  }
  return { dir: relDir, name: manifest.name, manifest, manifestPath, manifestText, layer, rank: LAYERS.indexOf(layer), files, problems }
}

function packageFiles(dir) {
  const found = []
  const walk = (current) => {
    for (const entry of readdirSync(current, { withFileTypes: true })) {
      if (entry.isDirectory()) {
        if (!SKIPPED_DIRS.has(entry.name)) walk(join(current, entry.name))
      } else if (entry.isFile() && SOURCE.test(entry.name)) found.push(join(current, entry.name))
    }
  }
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.isDirectory() && SCANNED_DIRS.includes(entry.name)) walk(join(dir, entry.name))
    else if (entry.isFile() && SOURCE.test(entry.name) && !CONFIG.test(entry.name)) found.push(join(dir, entry.name))
  }
  return found.sort()
}

function lineCount(text) {
  if (text === '') return 0
  const newlines = text.split('\n').length - 1
  return text.endsWith('\n') ? newlines : newlines + 1
}

function langOf(path) {
  if (/\.tsx$/.test(path)) return 'tsx'
  if (/\.(c|m)?ts$/.test(path)) return 'ts'
  if (/\.jsx$/.test(path)) return 'jsx'
  return 'js'
}

/** Every module specifier `text` names, with its line and whether it is a type-only or augmentation edge. */
export function importsOf(text, filename = 'file.ts') {
  const ast = parseAst(text, { lang: langOf(filename), sourceType: 'module' }, filename)
  const starts = [0]
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 10) starts.push(i + 1)
  const lineAt = (offset) => {
    let lo = 0
    let hi = starts.length - 1
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1
      if (starts[mid] <= offset) lo = mid
      else hi = mid - 1
    }
    return lo + 1
  }
  const found = []
  const add = (node, source, how) => {
    const specifier = literal(source)
    if (specifier !== undefined) found.push({ specifier, line: lineAt(node.start), how })
  }
  const visit = (node) => {
    if (Array.isArray(node)) {
      for (const child of node) visit(child)
      return
    }
    if (node === null || typeof node !== 'object') return
    switch (node.type) {
      case 'ImportDeclaration':
        add(node, node.source, node.importKind === 'type' ? 'type' : 'static')
        break
      case 'ExportAllDeclaration':
      case 'ExportNamedDeclaration':
        if (node.source) add(node, node.source, node.exportKind === 'type' ? 'type' : 'static')
        break
      case 'ImportExpression':
        add(node, node.source, 'dynamic')
        break
      case 'TSImportType':
        add(node, node.source ?? node.argument?.literal ?? node.argument, 'type')
        break
      case 'TSImportEqualsDeclaration':
        if (node.moduleReference?.type === 'TSExternalModuleReference') add(node, node.moduleReference.expression, 'static')
        break
      case 'TSModuleDeclaration':
        if (node.id?.type === 'Literal') add(node, node.id, 'augment')
        break
      case 'CallExpression':
        if (node.callee?.type === 'Identifier' && node.callee.name === 'require') add(node, node.arguments?.[0], 'require')
        break
    }
    for (const key in node) if (key !== 'type' && typeof node[key] === 'object') visit(node[key])
  }
  visit(ast.body)
  return found
}

function literal(node) {
  if (node?.type === 'Literal' && typeof node.value === 'string') return node.value
  if (node?.type === 'TemplateLiteral' && node.expressions.length === 0) return node.quasis[0]?.value.cooked ?? undefined
  return undefined
}

const isRelative = (specifier) => specifier.startsWith('./') || specifier.startsWith('../') || specifier === '.' || specifier === '..'

/** The workspace package a bare specifier names, and the subpath after its name ('' for the name itself). */
function workspaceTarget(specifier, byName) {
  if (isRelative(specifier) || specifier.startsWith('/') || /^[a-z]+:/.test(specifier)) return undefined
  const parts = specifier.split('/')
  const name = specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]
  const pkg = byName.get(name)
  return pkg === undefined ? undefined : { pkg, subpath: specifier.slice(name.length + 1) }
}

/** The line of `"name"` inside `section` of a package.json text (1 when not found). */
function manifestLine(text, section, name) {
  const lines = text.split('\n')
  const start = lines.findIndex((line) => line.includes(`"${section}"`))
  if (start < 0) return 1
  for (let i = start + 1; i < lines.length; i++) {
    if (lines[i].includes(`"${name}"`)) return i + 1
    if (/^\s*}/.test(lines[i])) break
  }
  return start + 1
}

function layerOf(pkg) {
  return pkg.rank >= 0 ? pkg.layer : `outside the layering (${pkg.dir}/)`
}

function layerViolations(pkg, byName) {
  if (pkg.rank < 0) return []
  const violations = []
  const upward = (target) => target !== pkg && (target.rank < 0 || target.rank > pkg.rank)
  const describe = (target) => {
    const fix =
      target.rank < 0
        ? `${target.dir}/ is for development only: move what src needs from ${target.name} into a package of layer ${pkg.layer} or earlier`
        : `move the code that needs ${target.name} into a package of layer ${target.layer} or later, or move what it uses from ${target.name} down to layer ${pkg.layer} or earlier; to call upward at run time, take it as a service injected at activation`
    return { message: `${pkg.name} (layer ${pkg.layer}) depends on ${target.name} (${layerOf(target)}); order: ${LAYER_ORDER}`, fix }
  }
  for (const section of MANIFEST_SECTIONS) {
    if (!LAYERED_SECTIONS.has(section)) continue
    for (const name of Object.keys(pkg.manifest[section] ?? {})) {
      const target = byName.get(name)
      if (target !== undefined && upward(target))
        violations.push({
          rule: 'upward-import',
          file: pkg.manifestPath,
          line: manifestLine(pkg.manifestText, section, name),
          ...describe(target),
        })
    }
  }
  for (const file of pkg.files) {
    if (!file.inSrc) continue
    for (const { specifier, line } of file.imports) {
      const target = workspaceTarget(specifier, byName)?.pkg
      if (target !== undefined && upward(target)) {
        const { message, fix } = describe(target)
        violations.push({ rule: 'upward-import', file: file.path, line, message: `${message} (import '${specifier}')`, fix })
      }
    }
  }
  return violations
}

/** Whether `./<subpath>` is one of the `exports` keys (patterns with one `*` included). */
export function exported(manifest, subpath) {
  if (subpath === '') return true
  const exports = manifest.exports
  if (exports === undefined || typeof exports === 'string' || Array.isArray(exports)) return false
  const wanted = `./${subpath}`
  for (const key of Object.keys(exports)) {
    if (key === wanted) return true
    const star = key.indexOf('*')
    if (star >= 0 && wanted.startsWith(key.slice(0, star)) && wanted.endsWith(key.slice(star + 1)) && wanted.length >= key.length - 1)
      return true
  }
  return false
}

function publicFaces(manifest) {
  const exports = manifest.exports
  if (exports === undefined || typeof exports === 'string' || Array.isArray(exports)) return `'${manifest.name}'`
  const keys = Object.keys(exports).filter((key) => key.startsWith('.'))
  return keys.length === 0 ? `'${manifest.name}'` : keys.map((key) => `'${manifest.name}${key.slice(1)}'`).join(', ')
}

function internalViolations(root, pkg, byName) {
  const violations = []
  const home = join(root, pkg.dir)
  for (const file of pkg.files) {
    for (const { specifier, line, how } of file.imports) {
      if (how === 'augment') continue
      if (isRelative(specifier) || specifier.startsWith('/')) {
        const target = resolve(dirname(file.abs), specifier)
        if (target !== home && !target.startsWith(home + sep))
          violations.push({
            rule: 'internal-import',
            file: file.path,
            line,
            message: `'${specifier}' leaves ${pkg.name}'s folder (${pkg.dir}/) and reaches ${posix(relative(root, target))}`,
            fix: 'import the other package by its name (one of its exports) and declare it in package.json, or move the file into this package',
          })
        continue
      }
      const target = workspaceTarget(specifier, byName)
      if (target !== undefined && !exported(target.pkg.manifest, target.subpath))
        violations.push({
          rule: 'internal-import',
          file: file.path,
          line,
          message: `'${specifier}' is an internal of ${target.pkg.name}, not one of its exports (${publicFaces(target.pkg.manifest)})`,
          fix: `import it from ${target.pkg.name}'s index (export it there if it is meant to be public), or add a deliberate subpath to its exports`,
        })
    }
  }
  return violations
}

/** Resolves a relative specifier to a checked file: exact path, .js -> .ts, added extension, or a folder's index. */
function resolveFile(fromAbs, specifier, known) {
  const target = resolve(dirname(fromAbs), specifier)
  const candidates = [target]
  const swap = { '.js': ['.ts', '.tsx'], '.mjs': ['.mts'], '.cjs': ['.cts'], '.jsx': ['.tsx'] }
  const ext = /\.(c|m)?jsx?$/.exec(target)?.[0]
  if (ext !== undefined) for (const to of swap[ext]) candidates.push(target.slice(0, -ext.length) + to)
  for (const to of ['.ts', '.tsx', '.mts', '.cts', '.js', '.mjs', '.cjs', '.jsx']) candidates.push(target + to)
  for (const to of ['.ts', '.tsx', '.js', '.mjs']) candidates.push(join(target, `index${to}`))
  return candidates.find((candidate) => known.has(candidate))
}

/** Strongly connected components of `graph` (Map node -> Map neighbour -> evidence) with a loop in them. */
function knots(graph) {
  let counter = 0
  const index = new Map()
  const low = new Map()
  const stack = []
  const onStack = new Set()
  const found = []
  const strong = (start) => {
    // Iterative Tarjan: a deep import chain must not overflow the call stack.
    const frames = [{ node: start, next: [...(graph.get(start)?.keys() ?? [])], at: 0 }]
    index.set(start, counter)
    low.set(start, counter++)
    stack.push(start)
    onStack.add(start)
    while (frames.length > 0) {
      const frame = frames.at(-1)
      if (frame.at < frame.next.length) {
        const next = frame.next[frame.at++]
        if (!index.has(next)) {
          index.set(next, counter)
          low.set(next, counter++)
          stack.push(next)
          onStack.add(next)
          frames.push({ node: next, next: [...(graph.get(next)?.keys() ?? [])], at: 0 })
        } else if (onStack.has(next)) low.set(frame.node, Math.min(low.get(frame.node), index.get(next)))
        continue
      }
      frames.pop()
      if (frames.length > 0) {
        const parent = frames.at(-1).node
        low.set(parent, Math.min(low.get(parent), low.get(frame.node)))
      }
      if (low.get(frame.node) === index.get(frame.node)) {
        const component = []
        let member
        do {
          member = stack.pop()
          onStack.delete(member)
          component.push(member)
        } while (member !== frame.node)
        if (component.length > 1 || graph.get(frame.node)?.has(frame.node)) found.push(component.sort())
      }
    }
  }
  for (const node of [...graph.keys()].sort()) if (!index.has(node)) strong(node)
  return found
}

/** The shortest loop from the component's first node back to itself, as [node, evidence] steps. */
function loopIn(graph, component) {
  const members = new Set(component)
  const start = component[0]
  const previous = new Map()
  const queue = [start]
  for (let i = 0; i < queue.length; i++) {
    const node = queue[i]
    for (const [next, evidence] of graph.get(node) ?? []) {
      if (!members.has(next)) continue
      if (next === start) {
        const steps = [[node, evidence, next]]
        let at = node
        while (at !== start) {
          const [from, how] = previous.get(at)
          steps.unshift([from, how, at])
          at = from
        }
        return steps
      }
      if (!previous.has(next) && next !== start) {
        previous.set(next, [node, evidence])
        queue.push(next)
      }
    }
  }
  return []
}

function fileCycles(root, packages) {
  const files = packages.flatMap((pkg) => pkg.files)
  const byAbs = new Map(files.map((file) => [file.abs, file]))
  const known = new Set(byAbs.keys())
  const graph = new Map()
  for (const file of files) {
    const edges = new Map()
    for (const { specifier, line, how } of file.imports) {
      if (how === 'augment' || !isRelative(specifier)) continue
      const target = resolveFile(file.abs, specifier, known)
      if (target !== undefined && !edges.has(target)) edges.set(target, { line, how })
    }
    graph.set(file.abs, edges)
  }
  return knots(graph).map((component) => {
    const steps = loopIn(graph, component)
    const [first] = steps
    const shown = (abs) => posix(relative(root, abs))
    const loop = steps.map(([from, { line, how }]) => `${shown(from)}:${line}${how === 'type' ? ' (type-only)' : ''}`).join(' -> ')
    const extra =
      component.length > steps.length ? `; ${component.length} files are tied in this knot: ${component.map(shown).join(', ')}` : ''
    return {
      rule: 'file-cycle',
      file: shown(first[0]),
      line: first[1].line,
      cycle: component.map(shown),
      message: `import cycle: ${loop} -> ${shown(first[0])}${extra}`,
      fix: 'move what the files share into a module both import (a types-only module for shared types), or pass the dependency in instead of importing it',
    }
  })
}

function packageCycles(packages, byName) {
  const graph = new Map()
  for (const pkg of packages) {
    const edges = new Map()
    for (const section of MANIFEST_SECTIONS)
      for (const name of Object.keys(pkg.manifest[section] ?? {}))
        if (byName.has(name) && name !== pkg.name && !edges.has(name))
          edges.set(name, `${pkg.manifestPath}:${manifestLine(pkg.manifestText, section, name)} (${section})`)
    for (const file of pkg.files)
      for (const { specifier, line } of file.imports) {
        const target = workspaceTarget(specifier, byName)?.pkg
        if (target !== undefined && target !== pkg && !edges.has(target.name)) edges.set(target.name, `${file.path}:${line}`)
      }
    graph.set(pkg.name, edges)
  }
  return knots(graph).map((component) => {
    const steps = loopIn(graph, component)
    const loop = steps.map(([from, evidence, to]) => `${from} -> ${to} (${evidence})`).join('; ')
    const head = byName.get(component[0])
    return {
      rule: 'package-cycle',
      file: head.manifestPath,
      line: 1,
      cycle: component,
      message: `package cycle: ${loop}`,
      fix: 'drop one edge of the loop: the lower package must not need the higher one (tests included: a test that needs both belongs to the higher package)',
    }
  })
}

function printText(result) {
  const counts = new Map()
  for (const violation of result.violations) {
    counts.set(violation.rule, (counts.get(violation.rule) ?? 0) + 1)
    const where = `${violation.file}:${violation.line}`
    const tag = violation.rule === 'file-length' ? `${violation.rule}, ${violation.kind}` : violation.rule
    console.log(`${where}  [${tag}] ${violation.message}\n    fix: ${violation.fix}`)
  }
  const byRule = [...counts].map(([rule, n]) => `${rule} ${n}`).join(', ')
  console.log(
    `check-structure: ${result.packages} packages, ${result.files} files, ${result.violations.length} violation${result.violations.length === 1 ? '' : 's'}${byRule ? ` (${byRule})` : ''}`,
  )
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const args = process.argv.slice(2)
  const json = args.includes('--json')
  const positional = args.filter((arg) => !arg.startsWith('--'))
  const root = resolve(positional[0] ?? repoRoot)
  if (positional.length > 1 || args.some((arg) => arg.startsWith('--') && arg !== '--json')) {
    console.error('usage: node tooling/scripts/check-structure.mjs [root] [--json]')
    process.exit(2)
  }
  if (!existsSync(join(root, 'pnpm-workspace.yaml')) || !statSync(root).isDirectory()) {
    console.error(`check-structure: ${root} holds no pnpm-workspace.yaml; pass the workspace root`)
    process.exit(2)
  }
  const result = checkStructure(root)
  if (json) console.log(JSON.stringify(result, null, 2))
  else printText(result)
  process.exitCode = result.violations.length === 0 ? 0 : 1
}
