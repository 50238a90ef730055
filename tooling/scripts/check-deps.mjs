#!/usr/bin/env node
// Honest manifests: a package's `dependencies` are exactly
// what its `src` imports. Fails (exit 1) when
//   - a `dependencies` entry is not imported by any file under src/ (unused), or
//   - src/ imports a package that is not in `dependencies`,
//     `peerDependencies` or `optionalDependencies` (undeclared).
// Type-only imports count as imports (published .d.ts files need them). An
// `@types/x` dependency is used when src imports `x`. Node builtins, relative
// paths and the package's own name are ignored.
//
// Usage: node tooling/scripts/check-deps.mjs [--json]
import { readdirSync, readFileSync } from 'node:fs'
import { builtinModules } from 'node:module'
import { join, resolve } from 'node:path'
import { repoRoot, workspacePackages } from './workspace.mjs'

const SOURCE = /\.(c|m)?(t|j)sx?$/
const builtins = new Set(builtinModules)

/** Package names a source file imports (static, dynamic, type-only, re-exports, require). */
export function importedPackages(text) {
  const names = new Set()
  const patterns = [
    /^\s*import\s+(?:type\s+)?(?:[\w\s{},*$]*?\s*from\s*)?['"]([^'"]+)['"]/gm,
    /^\s*export\s+(?:type\s+)?(?:\*(?:\s+as\s+[\w$]+)?|\{[\w\s,$]*\})\s*from\s*['"]([^'"]+)['"]/gm,
    /\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g,
    /(?<![.\w$])require\s*\(\s*['"]([^'"]+)['"]\s*\)/g,
    /^\s*declare\s+module\s+['"]([^'"]+)['"]/gm,
  ]
  const code = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`\\])\/\/.*$/gm, '$1')
  for (const pattern of patterns) for (const match of code.matchAll(pattern)) names.add(packageOf(match[1]))
  names.delete(undefined)
  return names
}

function packageOf(specifier) {
  if (specifier.startsWith('.') || specifier.startsWith('/') || specifier.startsWith('node:') || specifier.startsWith('data:'))
    return undefined
  const parts = specifier.split('/')
  const name = specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]
  return builtins.has(name) ? undefined : name
}

function sourceFiles(dir) {
  let entries
  try {
    entries = readdirSync(dir, { recursive: true, withFileTypes: true })
  } catch {
    return []
  }
  return entries
    .filter((e) => e.isFile() && SOURCE.test(e.name) && !e.name.endsWith('.d.ts'))
    .map((e) => join(e.parentPath ?? e.path, e.name))
}

export function checkPackage({ dir, manifest }) {
  const imported = new Set()
  for (const file of sourceFiles(join(resolve(repoRoot, dir), 'src')))
    for (const name of importedPackages(readFileSync(file, 'utf8'))) imported.add(name)
  imported.delete(manifest.name)
  const deps = Object.keys(manifest.dependencies ?? {})
  const declared = new Set([...deps, ...Object.keys(manifest.peerDependencies ?? {}), ...Object.keys(manifest.optionalDependencies ?? {})])
  const typesFor = (dep) => (dep.startsWith('@types/') ? dep.slice(7).replace(/^(.+)__(.+)$/, '@$1/$2') : undefined)
  const unused = deps.filter((dep) => !imported.has(dep) && !(typesFor(dep) !== undefined && imported.has(typesFor(dep))))
  const undeclared = [...imported].filter((name) => !declared.has(name)).sort()
  return { dir, name: manifest.name, unused, undeclared }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const results = workspacePackages().map(checkPackage)
  const bad = results.filter((r) => r.unused.length > 0 || r.undeclared.length > 0)
  if (process.argv.includes('--json')) console.log(JSON.stringify(bad, null, 2))
  else {
    for (const r of bad) {
      if (r.unused.length > 0) console.log(`${r.name} (${r.dir}): dependencies not imported by src: ${r.unused.join(', ')}`)
      if (r.undeclared.length > 0) console.log(`${r.name} (${r.dir}): src imports undeclared packages: ${r.undeclared.join(', ')}`)
    }
    console.log(`check-deps: ${results.length} packages, ${bad.length} with dishonest manifests`)
  }
  process.exitCode = bad.length === 0 ? 0 : 1
}
