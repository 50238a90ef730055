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

/** The app's program: the lines of `dist/bin.js`, and where its manifest's `bin` points. */
interface Program {
  readonly lines: readonly string[]
  readonly bin: string
}

const ES_PROGRAM: Program = {
  bin: './dist/bin.js',
  lines: [
    '#!/usr/bin/env node',
    'import { here, viaImport, viaRequire, later, names } from "@dsh/lib";',
    'const lazy = await later();',
    'console.log(JSON.stringify({ here, viaImport, viaRequire, lazy: lazy.default.answer, names }));',
  ],
}

function workspace(program: Program = ES_PROGRAM): string {
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
    JSON.stringify({ name: 'app', type: 'module', bin: { app: program.bin }, dependencies: { '@dsh/lib': '*' } }),
  )
  write(join(app, 'dist', 'bin.js'), [...program.lines, ''].join('\n'))
  mkdirSync(join(app, 'node_modules', '@dsh'), { recursive: true })
  symlinkSync(join('..', '..', '..', 'lib'), join(app, 'node_modules', '@dsh', 'lib'))
  return dir
}

/** What the miniature app prints of its library, for a tree at `root`. */
function libraryAnswers(root: string): Record<string, unknown> {
  return {
    here: pathToFileURL(join(root, 'lib', 'dist', 'index.js')).href,
    viaImport: 42,
    viaRequire: 21,
    lazy: 21,
    names: ['LibraryFailure', 'describeLocally'],
  }
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

  const expected = libraryAnswers
  expect(JSON.parse(run([join(app, 'dist', 'bin.js')], app))).toEqual(expected(dir))
  // Nothing absolute is baked in: the moved tree answers from its new place.
  const moved = `${dir}-moved`
  renameSync(dir, moved)
  cleanups.unshift(() => renameSync(moved, dir))
  expect(JSON.parse(run([join(moved, 'app', 'dist', 'bin.js')], join(moved, 'app')))).toEqual(expected(moved))
})

it('builds a program as CommonJS (--commonjs): the inlined package resolves from its own place, a lazy chunk loaded only when asked, wherever the tree is moved', () => {
  // A program without top-level await (CommonJS has none), with a lazy module of its own that reads its own URL.
  const dir = workspace({
    bin: './dist/bin.cjs',
    lines: [
      '#!/usr/bin/env node',
      'import { here, viaImport, viaRequire, later, names } from "@dsh/lib";',
      'const before = globalThis.lateRan === true;',
      'Promise.all([later(), import("./late.js")]).then(([lazy, late]) =>',
      '  console.log(JSON.stringify({ here, viaImport, viaRequire, lazy: lazy.default.answer, names, before, late: late.self })));',
    ],
  })
  const app = join(dir, 'app')
  write(join(app, 'dist', 'late.js'), 'globalThis.lateRan = true;\nexport const self = import.meta.url;\n')
  const expected = (root: string): unknown => ({
    ...libraryAnswers(root),
    before: false,
    late: pathToFileURL(join(root, 'app', 'dist', 'late.js')).href,
  })
  run([bundler, '--inline', '@dsh/*', '--commonjs', 'bin.js'], app)
  const files = readdirSync(join(app, 'dist'), { recursive: true }).map(String)
  expect(files).toContain('bin.cjs')
  expect(files).toContain('late.cjs')
  // The program's ES module sources are replaced, not left beside it.
  expect(files.filter((file) => /\.js$/.test(file))).toEqual([])
  expect(readFileSync(join(app, 'dist', 'bin.cjs'), 'utf8').startsWith('#!/usr/bin/env node\n')).toBe(true)
  for (const file of files.filter((name) => name.endsWith('.cjs')))
    expect(readFileSync(join(app, 'dist', file), 'utf8'), file).not.toMatch(/import\.meta|^import |^export /m)
  // The lazy module is its own chunk, required only when the program asks for it.
  expect(readFileSync(join(app, 'dist', 'bin.cjs'), 'utf8')).not.toMatch(/lateRan\s*=\s*true/)
  expect(JSON.parse(run([join(app, 'dist', 'bin.cjs')], app))).toEqual(expected(dir))
  const moved = `${dir}-moved`
  renameSync(dir, moved)
  cleanups.unshift(() => renameSync(moved, dir))
  expect(JSON.parse(run([join(moved, 'app', 'dist', 'bin.cjs')], join(moved, 'app')))).toEqual(expected(moved))
})

it('refuses an inlined module whose import of another package it cannot rewrite', () => {
  const dir = workspace()
  write(join(dir, 'lib', 'dist', 'index.js'), 'export { answer } from "dep";\n')
  const child = spawnSync(process.execPath, [bundler, '--inline', '@dsh/*'], { cwd: join(dir, 'app'), encoding: 'utf8' })
  expect(child.status).not.toBe(0)
  expect(child.stderr).toContain('in a form the inliner does not rewrite')
})

// bundle-package.mjs on a package in miniature whose chunks form a chain:
// entry `one` reaches `x`, which reaches `y`; `two` reaches only `y` and
// `three` only `x` (each with a builtin of its own, so neither entry's chunk
// can take them in), so `x` and `y` land in chunks of their own and `one`'s
// chunk reaches `y`'s only through `x`'s. Each module records when it runs.
const runs = (name: string): string => `globalThis.order = [...(globalThis.order ?? []), ${JSON.stringify(name)}];\n`

function chainPackage(): string {
  const { dir, cleanup } = kitTempDir('dsh-bundle-')
  cleanups.push(cleanup)
  const exports = Object.fromEntries(['one', 'two', 'three'].map((name) => [`./${name}`, `./dist/${name}.js`]))
  write(join(dir, 'package.json'), JSON.stringify({ name: 'chain', type: 'module', exports }))
  write(join(dir, 'dist', 'y.js'), `${runs('y')}export const y = 'y';\n`)
  write(join(dir, 'dist', 'x.js'), `import { y } from './y.js';\n${runs('x')}export const x = 'x' + y;\n`)
  write(
    join(dir, 'dist', 'one.js'),
    `import { x } from './x.js';\nexport { accent } from './side.js';\n${runs('one')}export const one = x;\n`,
  )
  // Text beyond ASCII in a comment and in a string.
  write(join(dir, 'dist', 'side.js'), `${runs('side')}/** Café — accented. */\nexport const accent = 'café — ☕';\n`)
  write(
    join(dir, 'dist', 'two.js'),
    `import { y } from './y.js';\nimport { EOL } from 'node:os';\n${runs('two')}export const two = y + EOL;\n`,
  )
  write(
    join(dir, 'dist', 'three.js'),
    `import { x } from './x.js';\nimport { sep } from 'node:path';\n${runs('three')}export const three = x + sep;\n`,
  )
  return dir
}

function evaluationOrder(dir: string): string[] {
  const child = spawnSync(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `const { accent } = await import('./dist/one.js'); console.log(JSON.stringify([accent, ...globalThis.order]))`,
    ],
    { cwd: dir, encoding: 'utf8' },
  )
  expect(child.stderr).toBe('')
  expect(child.status).toBe(0)
  return JSON.parse(child.stdout) as string[]
}

/** The relative specifiers a chunk requests (imports and re-exports). */
function requests(path: string): string[] {
  return [...readFileSync(path, 'utf8').matchAll(/(?:import|export)\s*(?:[^'";]*?\bfrom\s*)?["'](\.[^"']+)["']/g)].map((match) => match[1]!)
}

it('names every chunk a chunk reaches among its own imports, runs the modules in the same order as before bundling, and writes ASCII without doc comments', () => {
  const dir = chainPackage()
  const before = evaluationOrder(dir)
  expect(before).toEqual(['café — ☕', 'y', 'x', 'side', 'one'])
  const bundled = spawnSync(process.execPath, [bundler], { cwd: dir, encoding: 'utf8' })
  expect(bundled.stderr).toBe('')
  expect(bundled.status).toBe(0)
  expect(readdirSync(join(dir, 'dist')).filter((file) => file.endsWith('.js'))).toEqual(
    expect.arrayContaining(['one.js', 'x-shared.js', 'y-shared.js']),
  )
  expect(requests(join(dir, 'dist', 'x-shared.js'))).toEqual(['./y-shared.js'])
  // `one` reaches y's chunk only through x's chunk, and requests it itself, after its own imports.
  expect(requests(join(dir, 'dist', 'one.js'))).toEqual(['./x-shared.js', './y-shared.js'])
  expect(evaluationOrder(dir)).toEqual(before)
  // What Node parses is ASCII (strings escaped) and carries no doc comment.
  for (const file of readdirSync(join(dir, 'dist')).filter((name) => name.endsWith('.js'))) {
    const bytes = readFileSync(join(dir, 'dist', file))
    expect(bytes.every((byte) => byte < 0x80)).toBe(true)
    expect(bytes.toString('latin1')).not.toContain('accented')
  }
})
