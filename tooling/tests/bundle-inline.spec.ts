import { spawnSync } from 'node:child_process'
import { mkdirSync, readdirSync, readFileSync, renameSync, symlinkSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { tempDir as kitTempDir } from '@dsh/test-kit'
import { afterEach, expect, it } from 'vitest'

// bundle-package.mjs --inline, on a real workspace in miniature: an app whose
// dependency `@dsh/lib` (inlined) uses `import.meta.url`, `createRequire`, a
// static and a dynamic import of `dep` — a CommonJS package installed under
// the library only, so that only the library's own resolution finds it.
const bundler = join(import.meta.dirname, '..', 'scripts', 'bundle-package.mjs')
const cleanups: Array<() => void> = []
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup()
})

function write(path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true })
  writeFileSync(path, text)
}

function workspace(): string {
  const { dir, cleanup } = kitTempDir('dsh-inline-')
  cleanups.push(cleanup)
  const lib = join(dir, 'lib')
  write(join(lib, 'package.json'), JSON.stringify({ name: '@dsh/lib', type: 'module', exports: { '.': './dist/index.js' } }))
  write(
    join(lib, 'dist', 'index.js'),
    [
      'import { createRequire } from "node:module";',
      'import dep from "dep";',
      'import { answer } from "dep";',
      'export const here = new URL("./index.js", import.meta.url).href;',
      'export const viaRequire = createRequire(import.meta.url)("dep").answer;',
      'export const viaImport = dep.answer + answer;',
      'export const later = () => import("dep");',
      // Names the minified application bundle must keep.
      'class LibraryFailure extends Error {}',
      'function describeLocally(value) { const described = String(value); return described; }',
      'export const names = [new LibraryFailure().constructor.name, describeLocally.name];',
      '',
    ].join('\n'),
  )
  write(join(lib, 'node_modules', 'dep', 'package.json'), JSON.stringify({ name: 'dep', main: 'index.js' }))
  write(join(lib, 'node_modules', 'dep', 'index.js'), 'module.exports = { answer: 21 }\n')
  const app = join(dir, 'app')
  write(
    join(app, 'package.json'),
    JSON.stringify({ name: 'app', type: 'module', bin: { app: './dist/bin.js' }, dependencies: { '@dsh/lib': '*' } }),
  )
  write(
    join(app, 'dist', 'bin.js'),
    [
      '#!/usr/bin/env node',
      'import { here, viaImport, viaRequire, later, names } from "@dsh/lib";',
      'const lazy = await later();',
      'console.log(JSON.stringify({ here, viaImport, viaRequire, lazy: lazy.default.answer, names }));',
      '',
    ].join('\n'),
  )
  mkdirSync(join(app, 'node_modules', '@dsh'), { recursive: true })
  symlinkSync(join('..', '..', '..', 'lib'), join(app, 'node_modules', '@dsh', 'lib'))
  return dir
}

function run(args: string[], cwd: string): string {
  const child = spawnSync(process.execPath, args, { cwd, encoding: 'utf8' })
  expect(child.stderr).toBe('')
  expect(child.status).toBe(0)
  return child.stdout
}

it('inlines a package: its import.meta.url and its imports still resolve from its own installed place, wherever the tree is moved', () => {
  const dir = workspace()
  const app = join(dir, 'app')
  run([bundler, '--inline', '@dsh/*'], app)
  // The library's code is in the app's dist (no import of @dsh/lib is left); `dep` stays outside the bundle.
  const chunks = readdirSync(join(app, 'dist'), { recursive: true }).map(String)
  const code = chunks.filter((file) => file.endsWith('.js')).map((file) => readFileSync(join(app, 'dist', file), 'utf8'))
  expect(code.some((text) => text.includes('viaRequire'))).toBe(true)
  expect(code.some((text) => /from\s*"@dsh\/lib"/.test(text))).toBe(false)
  expect(code.some((text) => text.includes('answer: 21'))).toBe(false)
  // An application's bundle is minified: no indentation, local names shortened.
  expect(code.some((text) => /\n[\t ]+\S/.test(text))).toBe(false)
  expect(code.some((text) => text.includes('described'))).toBe(false)

  const expected = (root: string): unknown => ({
    here: pathToFileURL(join(root, 'lib', 'dist', 'index.js')).href,
    viaImport: 42,
    viaRequire: 21,
    lazy: 21,
    names: ['LibraryFailure', 'describeLocally'],
  })
  expect(JSON.parse(run([join(app, 'dist', 'bin.js')], app))).toEqual(expected(dir))
  // Nothing absolute is baked in: the moved tree answers from its new place.
  const moved = `${dir}-moved`
  renameSync(dir, moved)
  cleanups.unshift(() => renameSync(moved, dir))
  expect(JSON.parse(run([join(moved, 'app', 'dist', 'bin.js')], join(moved, 'app')))).toEqual(expected(moved))
})

it('refuses an inlined module whose import of another package it cannot rewrite', () => {
  const dir = workspace()
  write(join(dir, 'lib', 'dist', 'index.js'), 'export { answer } from "dep";\n')
  const child = spawnSync(process.execPath, [bundler, '--inline', '@dsh/*'], { cwd: join(dir, 'app'), encoding: 'utf8' })
  expect(child.status).not.toBe(0)
  expect(child.stderr).toContain('in a form the inliner does not rewrite')
})
