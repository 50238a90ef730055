import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import type BetterSqlite3 from 'better-sqlite3'

const require = createRequire(import.meta.url)
/**
 * better-sqlite3 is CommonJS: required, not imported. An ESM import of a
 * CommonJS module makes Node load its CommonJS lexer and scan the module's
 * source for named exports, a cost every short command opening the cache pays.
 */
const Database: typeof BetterSqlite3 = require('better-sqlite3')

/**
 * The addon better-sqlite3 installed (the first of `build/`, `build/Debug/`,
 * `build/Release/` holding `better_sqlite3.node`, its own lookup order), handed
 * to it as `nativeBinding`; `undefined` where an install put it elsewhere, and
 * better-sqlite3 then finds it as usual. Its own lookup (the `bindings`
 * package) walks a stack trace and tries each directory with a failing
 * `require`: about 1.5 ms of a `dsh sessions` that reads the cache.
 */
const nativeBinding = ((packageMain: string): string | undefined => {
  const build = join(dirname(packageMain), '..', 'build')
  return [build, join(build, 'Debug'), join(build, 'Release')]
    .map((dir) => join(dir, 'better_sqlite3.node'))
    .find((path) => existsSync(path))
})(require.resolve('better-sqlite3'))

/** Opens a SQLite database with better-sqlite3, its addon by path when installed where it looks first. */
export function openSqlite(path: string, options: BetterSqlite3.Options): BetterSqlite3.Database {
  return new Database(path, nativeBinding === undefined ? options : { ...options, nativeBinding })
}
