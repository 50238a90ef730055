import { spawnSync } from 'node:child_process'
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { tempDir as kitTempDir } from '@dsh/test-kit'
import { afterEach, expect, it } from 'vitest'

// bundle-package.mjs on a package in miniature whose chunks form a chain:
// entry `one` reaches `x`, which reaches `y`; `two` reaches only `y` and
// `three` only `x` (each with a builtin of its own, so neither entry's chunk
// can take them in), so `x` and `y` land in chunks of their own and `one`'s
// chunk reaches `y`'s only through `x`'s. Each module records when it runs.
const bundler = join(import.meta.dirname, '..', 'scripts', 'bundle-package.mjs')
const cleanups: Array<() => void> = []
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup()
})

function write(path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true })
  writeFileSync(path, text)
}

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
