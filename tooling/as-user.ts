import { execFileSync } from 'node:child_process'
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, dirname, join, sep } from 'node:path'

// Tests that run a process as another user (root bypasses permission checks,
// so a test of EACCES runs its reader as `nobody`) cannot run it from the
// checkout: a clone inside a directory that user may not traverse (root's
// home, mode 0700) would make the process fail before it starts. So the
// script and the packages it imports are copied into a world-readable
// temporary directory and run from there.

export interface RunAsOptions {
  /** Packages the script imports (e.g. `@dsh/session-persistence-jsonl`); they and their dependencies are copied. */
  readonly packages: readonly string[]
  /** Where to resolve `packages` from (a directory inside a package of the workspace, e.g. the test's). */
  readonly resolveFrom: string
}

/** A world-readable copy of a script and what it imports. */
export interface PortableCopy {
  /** The copied script. */
  readonly script: string
  /** The directory holding the copy (`node_modules` beside the script). */
  readonly dir: string
  /** Removes the copy. */
  readonly cleanup: () => void
}

/**
 * Copies `script` into a new world-readable directory under `os.tmpdir()`,
 * beside a `node_modules` holding `options.packages` and every package they
 * depend on (`dependencies` and installed `optionalDependencies`, flat): a
 * workspace package's `package.json` and published `files`, a third-party
 * package as installed (its native addon included), never their own
 * `node_modules`. Two versions of one package needed at once fail.
 */
export function portableCopy(script: string, options: RunAsOptions): PortableCopy {
  const dir = mkdtempSync(join(tmpdir(), 'dsh-as-user-'))
  try {
    const modules = join(dir, 'node_modules')
    const copied = new Map<string, string>()
    const queue = options.packages.map((name) => ({ name, from: options.resolveFrom, optional: false }))
    for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
      const source = packageDir(next.name, next.from)
      if (source === undefined) {
        if (next.optional) continue
        throw new Error(`portableCopy: cannot resolve ${next.name} from ${next.from}.`)
      }
      const already = copied.get(next.name)
      if (already !== undefined) {
        if (already !== source) throw new Error(`portableCopy: two copies of ${next.name} are needed (${already} and ${source}).`)
        continue
      }
      copied.set(next.name, source)
      const target = join(modules, ...next.name.split('/'))
      mkdirSync(dirname(target), { recursive: true })
      const manifest = JSON.parse(readFileSync(join(source, 'package.json'), 'utf8')) as {
        files?: string[]
        dependencies?: Record<string, string>
        optionalDependencies?: Record<string, string>
      }
      if (source.split(sep).includes('node_modules')) {
        // Installed from a registry: as installed, without its own dependencies' links.
        cpSync(source, target, { recursive: true, dereference: true, filter: (path) => basename(path) !== 'node_modules' })
      } else {
        // A workspace package: what it would publish.
        mkdirSync(target)
        for (const entry of ['package.json', ...(manifest.files ?? [])]) {
          if (existsSync(join(source, entry))) cpSync(join(source, entry), join(target, entry), { recursive: true, dereference: true })
        }
      }
      for (const name of Object.keys(manifest.dependencies ?? {})) queue.push({ name, from: source, optional: false })
      for (const name of Object.keys(manifest.optionalDependencies ?? {})) queue.push({ name, from: source, optional: true })
    }
    const copy = join(dir, basename(script))
    cpSync(script, copy)
    worldReadable(dir)
    return { script: copy, dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) }
  } catch (error) {
    rmSync(dir, { recursive: true, force: true })
    throw error
  }
}

/**
 * Runs `node <script> …args` as `user` (with `runuser`; the caller is root)
 * from a world-readable copy (`portableCopy`), and returns its stdout. The
 * copy is removed afterwards. A failure throws with the process's stderr.
 */
export function runNodeAs(user: string, script: string, args: readonly string[], options: RunAsOptions): string {
  const copy = portableCopy(script, options)
  try {
    return execFileSync('runuser', ['-u', user, '--', process.execPath, copy.script, ...args], {
      cwd: copy.dir,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    })
  } finally {
    copy.cleanup()
  }
}

/**
 * The real directory of package `name` as Node finds it from `from`: the
 * package `from` lies in when it is `name` (a package importing itself by
 * name), else the nearest `node_modules/<name>` up the tree.
 */
function packageDir(name: string, from: string): string | undefined {
  for (let at = from; ; at = dirname(at)) {
    const own = join(at, 'package.json')
    if (existsSync(own) && (JSON.parse(readFileSync(own, 'utf8')) as { name?: string }).name === name) return realpathSync(at)
    const candidate = join(at, 'node_modules', name)
    if (existsSync(join(candidate, 'package.json'))) return realpathSync(candidate)
    if (dirname(at) === at) return undefined
  }
}

/** Makes `dir` and everything under it readable (and directories traversable) by everyone. */
function worldReadable(dir: string): void {
  chmodSync(dir, 0o755)
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    const path = join(entry.parentPath, entry.name)
    const mode = statSync(path).mode
    chmodSync(path, entry.isDirectory() || (mode & 0o100) !== 0 ? 0o755 : 0o644)
  }
}
