// Bundles one workspace package's compiled dist/ with rolldown, run from the
// package's directory after tsc (its `build` script):
//   tsc -p tsconfig.build.json && node <repo>/tooling/scripts/bundle-package.mjs [extra entries…]
// Why: Node 20's ESM loader pays ~0.3-0.5 ms for each module file (resolution,
// read, compile, link) and a short CLI command loaded some 60 of ours; bundled,
// each package is a few files.
//
// - Entries: every dist file the `exports` map and `bin` name, plus the dist
//   paths given as arguments (files run by path, e.g. a worker). Each keeps its
//   exact path, so `exports`, `bin` and path lookups still work.
// - Only relative imports are bundled: other @dsh packages, third-party
//   packages and `node:` builtins stay external, so each package is still one
//   module instance per process and its dependency declarations are unchanged.
// - A dynamic `import()` inside the package stays lazy: its own chunk, at the
//   path of the module it loads (`commands/sessions.js`). Modules several
//   entries or lazy chunks share go to a chunk named `<first module>-shared.js`,
//   or to an entry's chunk when whatever loads them loads that entry's modules
//   anyway (see chunkNamesOf). Names are deterministic, never hashes.
// - `import.meta.url` still names the module's own dist file (see
//   withModuleUrls), so `new URL('./x.js', import.meta.url)` works as before.
// - tsc's .d.ts files stay as they are; every .js/.js.map tsc wrote is replaced
//   by the bundle's chunks and maps (which lead back to src/*.ts), so no stale
//   per-file module is left in dist or a packed tarball.
// - Any rolldown warning but INEFFECTIVE_DYNAMIC_IMPORT, and chunks that
//   import each other in a cycle, fail the build.
// - `--inline <package>` (repeatable; `@dsh/*` names a scope) bundles those
//   packages too, for an application (the CLI): see bundle-inline.mjs. Their
//   modules' chunks are named `vendor/<package>/<path>`.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { dirname, join, relative, resolve, sep } from 'node:path'
import { rolldown } from 'rolldown'
import { ANCHORS_CODE, ANCHORS_ID, inlineMatcher, inlining, packageNameOf } from './bundle-inline.mjs'

const dist = resolve('dist')
const manifest = JSON.parse(readFileSync('package.json', 'utf8'))
const args = process.argv.slice(2)
const valuesOf = (flag) => args.flatMap((arg, i) => (args[i - 1] === flag ? [arg] : []))
const inlinePatterns = valuesOf('--inline')
const programPaths = valuesOf('--commonjs').map((path) => resolve('dist', path))
const FLAGS = ['--inline', '--commonjs']
const extraEntries = args.filter((arg, i) => !FLAGS.includes(arg) && !FLAGS.includes(args[i - 1]))
const isInlined = inlineMatcher(inlinePatterns)
const inliner = inlinePatterns.length > 0 ? inlining(process.cwd()) : undefined
/** A module of this package's own dist (the rest of the bundle is inlined packages and the anchors helper). */
const isOwn = (id) => id.startsWith(dist + sep)
/** The order in which a chunk's modules are considered for its name: this package's, the workspace's, then installed ones (zod). */
const rank = (id) => (isOwn(id) ? 0 : id.includes(`${sep}node_modules${sep}`) ? 2 : 1)
const byNamePreference = (a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0)

/** Every string an `exports` map (or `bin`) leads to, for the conditions Node would follow to a dist file. */
function targets(value) {
  if (typeof value === 'string') return [value]
  if (value === null || typeof value !== 'object') return []
  return Object.entries(value).flatMap(([key, inner]) => (key === 'types' || key === '@dsh/source' ? [] : targets(inner)))
}

const entryPaths = new Set(
  [...targets(manifest.exports), ...targets(manifest.bin), ...extraEntries.map((path) => `./dist/${path}`)]
    .filter((path) => path.endsWith('.js'))
    .map((path) => resolve(path)),
)
for (const path of [...entryPaths, ...programPaths]) {
  if (!path.startsWith(dist + sep) || !path.endsWith('.js'))
    throw new Error(`bundle-package: entry ${path} is not a .js file under ${dist}`)
  if (!existsSync(path)) throw new Error(`bundle-package: entry ${path} does not exist (run tsc first)`)
}

function walk(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? walk(path) : [path]
  })
}

/** Entries run as programs (`#!`): rolldown keeps their code in their own file only when no group claims it. */
const executables = new Set([...entryPaths, ...programPaths].filter((path) => readFileSync(path, 'utf8').startsWith('#!')))
const nameOf = (path) => {
  if (path === ANCHORS_ID) return 'vendor/package-anchors'
  if (inliner !== undefined && !isOwn(path)) return inliner.nameOf(path)
  return relative(dist, path).replace(/\.js$/, '').split(sep).join('/')
}
const inputOf = (paths) => Object.fromEntries([...paths].map((path) => [nameOf(path), path]))
/** The build under way: its entries by name, and the chunk names given to its modules (see chunkNamesOf). */
let input
let chunkNames
/** The names chunkNamesOf gave to groups shared by several roots (an inlined file's own name may end in `-shared` too). */
let sharedNames

/**
 * `import.meta.url` keeps naming the module's own dist file wherever the
 * bundle puts its code: each module's is replaced by a token at load, and each
 * token by that file's URL, relative to its chunk's, when the chunk is written.
 */
const URL_TOKEN = '__dsh_module_url__:'
function withModuleUrls(code, chunkFileName, format) {
  const ownUrl = format === 'cjs' ? 'require("node:url").pathToFileURL(__filename)' : 'import.meta.url'
  // The minifier may quote a string with backticks.
  const out = code.replace(/(["'`])__dsh_module_url__:([^"'`]+)\1/g, (_, _quote, target) => {
    let path = relative(dirname(join(dist, chunkFileName)), join(dist, target))
      .split(sep)
      .join('/')
    if (!path.startsWith('.')) path = `./${path}`
    return `new URL(${JSON.stringify(path)}, ${ownUrl}).href`
  })
  if (out.includes(URL_TOKEN)) throw new Error(`bundle-package: ${chunkFileName} holds an import.meta.url token it could not replace`)
  return out
}

/**
 * Bundles `entries` (name -> dist path) as ES modules (`format` 'es', `.js`
 * files) or as a CommonJS program ('cjs', `.cjs` files: `--commonjs`), and
 * returns rolldown's output.
 */
async function build(entries, format) {
  input = entries
  chunkNames = undefined
  sharedNames = new Set()
  const ext = format === 'cjs' ? '.cjs' : '.js'
  const bundle = await rolldown({
    input,
    cwd: process.cwd(),
    platform: 'node',
    preserveEntrySignatures: 'allow-extension',
    // Bare specifiers stay imports, but for the packages inlined; resolved ids (absolute paths) are bundled.
    external: (id) => !id.startsWith('.') && !id.startsWith('/') && !id.startsWith('\0') && !isInlined(packageNameOf(id)),
    // An inlined package is read from its build, never from its sources.
    ...(inliner === undefined ? {} : { resolve: { conditionNames: ['node', 'import', 'default'] } }),
    logLevel: 'warn',
    onLog(level, log, handler) {
      // A module that is imported both statically and by `import()` (INEFFECTIVE_DYNAMIC_IMPORT) was
      // never lazy for the static importers; it stays with them. Any other warning fails the build.
      if (level === 'warn' && log.code !== 'INEFFECTIVE_DYNAMIC_IMPORT') throw new Error(`bundle-package: ${log.message}`)
      if (level === 'warn') return
      handler(level, log)
    },
    plugins: [
      {
        // tsc's output and its source map, so the bundle's map leads back to src/*.ts.
        name: 'tsc-output',
        resolveId(source, importer) {
          if (source === ANCHORS_ID) return source
          // What an inlined module imports from another package was rewritten on load (bundle-inline.mjs), or is inlined.
          if (importer !== undefined && inliner !== undefined && !isOwn(importer) && importer !== ANCHORS_ID) {
            const name = packageNameOf(source)
            if (name !== undefined && !isInlined(name))
              throw new Error(`bundle-package: ${importer} imports ${source}, which the inliner did not rewrite`)
          }
          return null
        },
        load(id) {
          if (id === ANCHORS_ID) return ANCHORS_CODE
          if (!id.endsWith('.js')) return null
          const text = readFileSync(id, 'utf8').replace(/\n\/\/# sourceMappingURL=.*\s*$/, '\n')
          const code =
            inliner === undefined || isOwn(id)
              ? text.replaceAll('import.meta.url', JSON.stringify(`${URL_TOKEN}${nameOf(id)}.js`))
              : inliner.rewrite(text, id, isInlined)
          const mapPath = `${id}.map`
          if (!existsSync(mapPath)) return code
          const map = JSON.parse(readFileSync(mapPath, 'utf8'))
          map.sources = map.sources.map((source) => resolve(dirname(id), map.sourceRoot ?? '', source))
          delete map.sourceRoot
          return { code, map }
        },
      },
      {
        // Bundling must not make loading an entry or a lazy chunk load more of the world: the external
        // imports its chunk and the chunks it imports statically bring are ones its unbundled module
        // reached through static imports, or (a lazy chunk) that the chunk importing it had loaded.
        name: 'no-new-external-loads',
        generateBundle(_options, files) {
          const chunks = Object.values(files).filter((file) => file.type === 'chunk')
          const byName = new Map(chunks.map((chunk) => [chunk.fileName, chunk]))
          const closure = (start, next) => {
            const seen = new Set([start])
            for (const item of seen) for (const more of next(item)) seen.add(more)
            return seen
          }
          const externalsOf = (chunk) =>
            [...closure(chunk.fileName, (name) => byName.get(name)?.imports ?? [])].filter((name) => !byName.has(name))
          for (const chunk of chunks) {
            if (!chunk.facadeModuleId) continue
            const allowed = closure(chunk.facadeModuleId, (id) => {
              const info = this.getModuleInfo(id)
              return info === null || info.isExternal === true ? [] : info.importedIds
            })
            const importers = (chunk.isEntry ? [] : (this.getModuleInfo(chunk.facadeModuleId)?.dynamicImporters ?? [])).map((id) => {
              const home = chunks.find((other) => other.moduleIds.includes(id))
              return home === undefined ? [] : externalsOf(home)
            })
            const added = externalsOf(chunk).filter(
              (name) => !allowed.has(name) && !(importers.length > 0 && importers.every((had) => had.includes(name))),
            )
            if (added.length > 0) throw new Error(`bundle-package: loading ${chunk.fileName} would now also load ${added.join(', ')}`)
          }
        },
      },
    ],
  })

  /**
   * The chunk each module goes to, by the roots that load it: an entry, or a
   * module loaded by `import()` (a lazy root). A root "reaches" the modules its
   * static imports lead to (stopping at other entries, which are chunks of their
   * own), less those that are always loaded before it (for a lazy root: what
   * every chunk that imports it has loaded). Modules reached by the same set of
   * roots share one chunk: a single root's chunk is named after it (so
   * `commands/sessions.js` stays where it was); a set's after its first module.
   * A module reached by several roots goes to the chunk of one of them when that
   * root's other modules and external imports are loaded by all the others anyway (e.g. an `exports`
   * entry that another entry's modules include).
   */
  function chunkNamesOf(context) {
    const info = (id) => context.getModuleInfo(id)
    // Bundled files and the anchors helper; rolldown places its own runtime helpers.
    const ours = (id) => {
      const found = info(id)
      return found !== null && found.isExternal !== true && (!id.startsWith('\0') || id === ANCHORS_ID)
    }
    const entryIds = new Set(Object.values(input))
    const lazyRoots = new Set()
    const reach = new Map()
    const reachOf = (root) => {
      if (!reach.has(root)) {
        const seen = new Set([root])
        for (const id of seen) {
          // External imports are kept too (not followed): they are part of what loading a root costs.
          for (const next of info(id)?.importedIds ?? []) if (!ours(next) || !entryIds.has(next)) seen.add(next)
          for (const next of info(id)?.dynamicallyImportedIds ?? []) if (ours(next) && !entryIds.has(next)) lazyRoots.add(next)
        }
        reach.set(root, seen)
      }
      return reach.get(root)
    }
    for (const entry of entryIds) reachOf(entry)
    for (const root of lazyRoots) reachOf(root)
    const roots = [...entryIds, ...lazyRoots]
    const loadedBefore = new Map(roots.map((root) => [root, new Set()]))
    for (let changed = true, rounds = 0; changed && rounds < 10; rounds++) {
      changed = false
      for (const root of lazyRoots) {
        let before
        for (const importer of info(root)?.dynamicImporters ?? []) {
          // Loaded whenever the importer is: everything that every root reaching the importer has loaded.
          let withImporter
          for (const other of roots) {
            if (other === root || !reach.get(other).has(importer)) continue
            const loaded = new Set([...reach.get(other), ...loadedBefore.get(other)])
            withImporter = withImporter === undefined ? loaded : new Set([...withImporter].filter((id) => loaded.has(id)))
          }
          withImporter ??= new Set()
          before = before === undefined ? withImporter : new Set([...before].filter((id) => withImporter.has(id)))
        }
        before ??= new Set()
        if (before.size !== loadedBefore.get(root).size) changed = true
        loadedBefore.set(root, before)
      }
    }
    const rootsOf = new Map()
    for (const root of roots)
      for (const id of reach.get(root)) if (ours(id) && !loadedBefore.get(root).has(id)) rootsOf.set(id, [...(rootsOf.get(id) ?? []), root])
    const loadsAll = (root, others) => {
      const mine = [...reach.get(root)].filter((id) => id !== root)
      return others.every((other) => mine.every((id) => reach.get(other).has(id) || loadedBefore.get(other).has(id)))
    }
    const names = new Map()
    const shared = new Map()
    for (const id of [...rootsOf.keys()].sort(byNamePreference)) {
      const owners = rootsOf.get(id)
      const owner =
        owners.length === 1 ? owners[0] : owners.find((root) => entryIds.has(root) && !executables.has(root) && loadsAll(root, owners))
      // A bin's and a lazy root's own modules are left to rolldown, which puts them in that root's chunk
      // (a group of the same name would be a second file beside it).
      if (owner !== undefined) {
        if (entryIds.has(owner) && !executables.has(owner)) names.set(id, nameOf(owner))
      } else {
        const key = owners.join('\n')
        if (!shared.has(key)) shared.set(key, `${nameOf(id)}-shared`)
        sharedNames.add(shared.get(key))
        names.set(id, shared.get(key))
      }
    }
    return withoutCycles(names, (id) => info(id)?.importedIds ?? [])
  }

  /**
   * Groups whose modules import each other both ways (possible once
   * `loadedBefore` takes different modules off different roots, as with
   * inlined packages) would be chunks in a cycle: each such set of groups
   * becomes one, named after an entry among them, else the first name.
   */
  function withoutCycles(names, importsOf) {
    const edges = new Map()
    for (const [id, group] of names) {
      if (!edges.has(group)) edges.set(group, new Set())
      for (const next of importsOf(id)) {
        const other = names.get(next)
        if (other !== undefined && other !== group) edges.get(group).add(other)
      }
    }
    // Tarjan's strongly connected components over the group graph.
    const index = new Map()
    const low = new Map()
    const stack = []
    const merged = new Map()
    let counter = 0
    const entryNames = new Set(Object.keys(input))
    const visit = (group) => {
      index.set(group, counter)
      low.set(group, counter++)
      stack.push(group)
      for (const next of edges.get(group) ?? []) {
        if (!index.has(next)) {
          visit(next)
          low.set(group, Math.min(low.get(group), low.get(next)))
        } else if (stack.includes(next)) low.set(group, Math.min(low.get(group), index.get(next)))
      }
      if (low.get(group) !== index.get(group)) return
      const component = []
      let member
      do {
        member = stack.pop()
        component.push(member)
      } while (member !== group)
      if (component.length === 1) return
      const name = component.find((member) => entryNames.has(member)) ?? component.sort()[0]
      for (const member of component) merged.set(member, name)
      if (!entryNames.has(name)) sharedNames.add(name)
    }
    for (const group of [...edges.keys()].sort()) if (!index.has(group)) visit(group)
    return merged.size === 0 ? names : new Map([...names].map(([id, group]) => [id, merged.get(group) ?? group]))
  }
  function chunkNameOf(id, context) {
    chunkNames ??= chunkNamesOf(context)
    return chunkNames.get(id) ?? null
  }

  const { output } = await bundle.generate({
    format,
    // What Node parses at every start: JSDoc and line comments are left to the
    // sources (the .d.ts files and the maps lead there), licence comments stay.
    // ASCII only (other characters escaped), so V8 holds each chunk's source as
    // one-byte text, which it decodes and scans faster than UTF-16.
    comments: { legal: true, annotation: false, jsdoc: false },
    charset: 'ascii',
    // An application's bundle (`--inline`, the CLI) is what every command
    // parses before it runs: without whitespace and with short local names it
    // costs `dsh agents` ~3% fewer instructions. Names of functions and classes
    // stay (errors and stack traces show them); a library's dist stays readable.
    ...(inliner === undefined
      ? {}
      : { minify: { compress: false, mangle: { toplevel: false, keepNames: true }, codegen: { removeWhitespace: true } } }),
    sourcemap: true,
    codeSplitting: {
      groups: [
        {
          debugName: 'modules by the roots that load them',
          name: chunkNameOf,
          includeDependenciesRecursively: false,
        },
      ],
    },
    entryFileNames: `[name]${ext}`,
    // A lazy chunk keeps the path of the module it loads (`commands/sessions.js`); a shared one is named after its first module.
    chunkFileNames: (chunk) => {
      if (chunk.isDynamicEntry && chunk.facadeModuleId) return `${nameOf(chunk.facadeModuleId)}${ext}`
      const [first] = chunk.moduleIds.filter((id) => !id.startsWith('\0')).sort(byNamePreference)
      if (sharedNames.has(chunk.name) || first === undefined) return `${chunk.name}${ext}`
      return `${nameOf(first)}-shared${ext}`
    },
  })
  await bundle.close()
  return output
}

/**
 * Each chunk's imports of other chunks, by file name. Chunks that import each
 * other in a cycle could run a module before one it needs: refused.
 */
function chunkImportsOf(output) {
  const importsOf = new Map(output.filter((file) => file.type === 'chunk').map((chunk) => [chunk.fileName, chunk.imports]))
  const done = new Set()
  const visit = (name, path) => {
    if (path.includes(name)) throw new Error(`bundle-package: chunks import each other in a cycle: ${[...path, name].join(' -> ')}`)
    if (done.has(name)) return
    for (const next of importsOf.get(name) ?? []) visit(next, [...path, name])
    done.add(name)
  }
  for (const name of importsOf.keys()) visit(name, [])
  return importsOf
}

/**
 * A chunk that starts a load (an entry, or the target of an `import()`) also
 * imports every chunk its static imports lead to, after all its own module
 * requests (one line before the source map comment, so the map stays valid).
 * Node's ESM loader learns a module's imports only once it has read that
 * module, so a chain of chunks costs one round of file reads per level; named
 * by the first chunk, they are read together. Chunks in between keep their
 * own imports only: theirs are then already under way, and every added
 * import is one more resolution. Evaluation order is unchanged: chunks form
 * no cycle, so each added chunk has already run through the chunk's own
 * imports by the time its added import is reached.
 */
function withTransitiveImports(code, chunk, importsOf) {
  const chunkFileName = chunk.fileName
  if (!chunk.isEntry && !chunk.isDynamicEntry) return code
  const direct = new Set(importsOf.get(chunkFileName) ?? [])
  const reached = new Set()
  const walkImports = (name) => {
    for (const next of importsOf.get(name) ?? []) {
      if (!importsOf.has(next) || reached.has(next)) continue
      reached.add(next)
      walkImports(next)
    }
  }
  walkImports(chunkFileName)
  const added = [...reached].filter((name) => !direct.has(name)).sort()
  if (added.length === 0) return code
  const line = added
    .map((name) => {
      const path = relative(dirname(join(dist, chunkFileName)), join(dist, name))
        .split(sep)
        .join('/')
      return `import ${JSON.stringify(path.startsWith('.') ? path : `./${path}`)};`
    })
    .join('')
  const map = code.lastIndexOf('\n//# sourceMappingURL=')
  return map === -1 ? `${code}\n${line}\n` : `${code.slice(0, map)}\n${line}${code.slice(map)}`
}

/**
 * The outputs: the package's entries as ES modules, and each `--commonjs`
 * program (e.g. the CLI's `bin.js`, built as `bin.cjs`) as CommonJS chunks of
 * its own. A program's short command pays for every ES module file it loads
 * (Node 20's ES module loader resolves, reads through the thread pool, links
 * and evaluates each one asynchronously): as CommonJS the same code loads
 * synchronously through `require`, ~18% fewer instructions for `dsh agents`.
 * `import()` of a chunk becomes a `require` in a promise, so a lazy command
 * stays lazy; `import()` of anything else stays an ES module import.
 */
const outputs = []
if (entryPaths.size > 0) outputs.push({ format: 'es', output: await build(inputOf(entryPaths), 'es') })
if (programPaths.length > 0) outputs.push({ format: 'cjs', output: await build(inputOf(programPaths), 'cjs') })

const written = /\.(c?js)(\.map)?$/
for (const path of walk(dist)) if (written.test(path)) rmSync(path)
for (const { format, output } of outputs) {
  const importsOf = chunkImportsOf(output)
  for (const file of output) {
    const path = join(dist, file.fileName)
    mkdirSync(dirname(path), { recursive: true })
    if (file.type === 'chunk') {
      const code = withModuleUrls(file.code, file.fileName, format)
      writeFileSync(path, format === 'es' ? withTransitiveImports(code, file, importsOf) : code)
      if (file.map) writeFileSync(`${path}.map`, file.map.toString())
    } else writeFileSync(path, file.source)
  }
}
