// What `bundle-package.mjs --inline <package>` adds: the packages named are
// bundled into this package's dist (an application's bundle) instead of being
// imported from node_modules. Why: Node 20's ESM loader pays for every module
// file, and zod alone is 95 of them; bundled, it is part of one chunk.
//
// An inlined module keeps behaving as it did in its own package:
// - Each inlined package is loaded once per process: only this bundle runs
//   its code (nothing in the process imports its own dist besides).
// - `import.meta.url` in an inlined module names its file in its installed
//   package, found at run time by resolving the package from this one through
//   the dependencies that lead to it (`@dsh/host` then
//   `@dsh/session-query-sqlite`), so `createRequire(import.meta.url)` and
//   `new URL('../src/web/', import.meta.url)` find what they found before.
// - Its imports of packages that are not inlined (better-sqlite3, pg, …) are
//   resolved the same way, from its own package, and loaded with `require`
//   (dynamic `import()` keeps its promise of the module's namespace).
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, relative, sep } from 'node:path'

/** The id of the virtual module holding the run-time helpers. */
export const ANCHORS_ID = '\0dsh-package-anchors'

/** Package name of a bare specifier (`@scope/name/sub` → `@scope/name`); undefined for relative, absolute and `node:` ones. */
export function packageNameOf(specifier) {
  if (specifier.startsWith('.') || specifier.startsWith('/') || specifier.startsWith('\0') || specifier.includes(':')) return undefined
  const parts = specifier.split('/')
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]
}

/** `@dsh/*` matches every package of the scope; anything else matches one package name exactly. */
export function inlineMatcher(patterns) {
  return (name) =>
    name !== undefined && patterns.some((pattern) => (pattern.endsWith('/*') ? name.startsWith(pattern.slice(0, -1)) : name === pattern))
}

/** The nearest directory above `file` holding a package.json, and that manifest. */
function packageOf(file, cache) {
  for (let dir = dirname(file); ; dir = dirname(dir)) {
    if (cache.has(dir)) return cache.get(dir)
    let found
    try {
      found = { root: dir, manifest: JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) }
    } catch {
      found = undefined
    }
    if (found !== undefined && typeof found.manifest.name === 'string') {
      cache.set(dir, found)
      return found
    }
    if (dirname(dir) === dir) throw new Error(`bundle-package: no package.json above ${file}`)
  }
}

/**
 * The build-time side of inlining for the package at `root`: which modules
 * are inlined (`ownerOf`), the dependency path from this package to an
 * inlined module's package (`chainOf`), and the rewrite of an inlined
 * module's code (`rewrite`).
 */
export function inlining(root) {
  const packages = new Map()
  const self = packageOf(join(root, 'package.json'), packages)
  const chains = new Map([[self.root, []]])
  // Breadth first over runtime dependencies, so each package gets its shortest path.
  const queue = [self]
  for (const current of queue) {
    const chain = chains.get(current.root)
    const names = Object.keys({ ...current.manifest.dependencies, ...current.manifest.optionalDependencies })
    for (const name of names) {
      let resolved
      try {
        resolved = createRequire(join(current.root, 'package.json')).resolve(name)
      } catch {
        continue // a package without a `require`-resolvable entry (types only, ESM-only exports): no path through it
      }
      const next = packageOf(resolved, packages)
      if (chains.has(next.root)) continue
      chains.set(next.root, [...chain, name])
      queue.push(next)
    }
  }

  /** The package an inlined module belongs to: `{ root, name, chain }`. */
  function ownerOf(file) {
    const { root: dir, manifest } = packageOf(file, packages)
    return { root: dir, name: manifest.name, chain: chains.get(dir) }
  }

  /** `vendor/<package>/<path in the package>`, the chunk name an inlined module is known by. */
  function nameOf(file) {
    const owner = ownerOf(file)
    return `vendor/${owner.name}/${relative(owner.root, file).split(sep).join('/')}`.replace(/\.js$/, '')
  }

  /**
   * An inlined module's code with `import.meta.url` and its imports of
   * packages that are not inlined anchored at its own package. `isInlined`
   * tells the package names that are bundled. Lines are kept, so the
   * module's source map still holds.
   */
  function rewrite(code, file, isInlined) {
    const owner = ownerOf(file)
    let used = false
    const chainOf = () => {
      if (owner.chain === undefined)
        throw new Error(
          `bundle-package: ${file} (${owner.name}) needs its package at run time, but no dependency path leads to it from ${self.manifest.name}`,
        )
      used = true
      return JSON.stringify(owner.chain.join(' '))
    }
    const others = (specifier) => {
      const name = packageNameOf(specifier)
      return name !== undefined && !isInlined(name)
    }
    let out = code
      .replace(/^import\s+(.+?)\s+from\s+"([^"]+)";?[ \t]*$/gm, (statement, clause, specifier) =>
        others(specifier) ? bindingsOf(clause, `__dshRequire(${chainOf()}, ${JSON.stringify(specifier)})`, file) : statement,
      )
      .replace(/^import\s+"([^"]+)";?[ \t]*$/gm, (statement, specifier) =>
        others(specifier) ? `__dshRequire(${chainOf()}, ${JSON.stringify(specifier)});` : statement,
      )
      .replace(/\bimport\(\s*"([^"]+)"\s*\)/g, (expression, specifier) =>
        others(specifier) ? `__dshImport(${chainOf()}, ${JSON.stringify(specifier)})` : expression,
      )
      .replaceAll(
        'import.meta.url',
        () => `__dshModuleUrl(${chainOf()}, ${JSON.stringify(relative(owner.root, file).split(sep).join('/'))})`,
      )
    if (/\bimport\.meta\b/.test(out)) throw new Error(`bundle-package: ${file} uses import.meta beyond import.meta.url`)
    const left = [...out.matchAll(/(?:^|[\s;])(?:import|export)\s[^;]*?\bfrom\s+"([^"]+)"/gm)].map((m) => m[1]).filter(others)
    if (left.length > 0) throw new Error(`bundle-package: ${file} imports ${left.join(', ')} in a form the inliner does not rewrite`)
    if (used) out = `import { __dshImport, __dshModuleUrl, __dshRequire } from ${JSON.stringify(ANCHORS_ID)};${out}`
    return out
  }

  return { ownerOf, nameOf, rewrite, self }
}

let bindingCount = 0

/** `X`, `* as X`, `{ a, b as c }` or `X, { … }` bound from `source` (a CommonJS module's exports, as `import` would give them), on one line. */
function bindingsOf(clause, source, file) {
  const match = /^(?:([\w$]+)\s*,?\s*)?(?:\*\s+as\s+([\w$]+)|\{([^}]*)\})?$/.exec(clause.trim())
  if (match === null) throw new Error(`bundle-package: ${file}: cannot rewrite the import clause '${clause}'`)
  const [, defaultName, namespaceName, named] = match
  if (namespaceName === undefined && named === undefined) return `const ${defaultName} = ${source};`
  const module = `__dshModule${bindingCount++}`
  const parts = [`const ${module} = ${source};`]
  if (defaultName !== undefined) parts.push(`const ${defaultName} = ${module};`)
  if (namespaceName !== undefined) parts.push(`const ${namespaceName} = { ...${module}, default: ${module} };`)
  if (named !== undefined) {
    const bindings = named
      .split(',')
      .map((item) => item.trim())
      .filter(Boolean)
      .map((item) => {
        const [imported, local] = item.split(/\s+as\s+/)
        return local === undefined ? imported : `${imported}: ${local}`
      })
    parts.push(`const { ${bindings.join(', ')} } = ${module};`)
  }
  return parts.join(' ')
}

/**
 * The run-time helpers, a module of the bundle: the root of a package found
 * through its dependency path from this one (each name resolved from the
 * package before it, as Node would for that package's own imports), a file
 * URL inside it, and `require`/`import()` of a module as that package
 * resolves it.
 */
export const ANCHORS_CODE = `
import { readFileSync, realpathSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const roots = new Map()

function packageRoot(chain) {
  let root = roots.get(chain)
  if (root !== undefined) return root
  let from = fileURLToPath(import.meta.url)
  for (const name of chain.split(' ')) from = join(installedPackage(from, name) ?? resolvedPackage(from, name), 'package.json')
  root = dirname(from)
  roots.set(chain, root)
  return root
}

// The directory Node's package lookup finds first: <dir>/node_modules/<name> in the
// directories above from, its real path (the next name is looked up from there, as Node
// would for that package's own imports). A few file reads, where resolving the name
// through the CommonJS loader costs a short command more than its work.
function installedPackage(from, name) {
  for (let dir = dirname(from); ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules', name)
    if (isPackage(candidate, name)) return realpathSync(candidate)
    if (dirname(dir) === dir) return undefined
  }
}

// The package's directory through Node's resolution (a layout the lookup above does not cover).
function resolvedPackage(from, name) {
  let dir = dirname(createRequire(from).resolve(name))
  while (!isPackage(dir, name)) {
    if (dirname(dir) === dir) throw new Error('dsh: cannot find the installed package ' + name)
    dir = dirname(dir)
  }
  return dir
}

function isPackage(dir, name) {
  try {
    return JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).name === name
  } catch {
    return false
  }
}

export function __dshModuleUrl(chain, path) {
  return pathToFileURL(join(packageRoot(chain), path)).href
}

export function __dshRequire(chain, specifier) {
  return createRequire(join(packageRoot(chain), 'package.json'))(specifier)
}

export function __dshImport(chain, specifier) {
  return import(pathToFileURL(createRequire(join(packageRoot(chain), 'package.json')).resolve(specifier)).href)
}
`
