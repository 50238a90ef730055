import { execFileSync } from 'node:child_process'
import { lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { openApiDocument } from '@dsh/protocol/openapi'
import { tempDir } from '@dsh/test-kit'
import { afterAll, describe, expect, it } from 'vitest'
import { cli } from './support/run.js'

// `dsh openapi` in this process: the document the protocol builds, to stdout
// or to a private file; a path that cannot be written is a typed error that
// leaves nothing behind.

const { dir, cleanup } = tempDir('dsh-openapi-')
afterAll(cleanup)

describe('dsh openapi', () => {
  it('prints the OpenAPI document of the route table to stdout', async () => {
    const run = await cli(['openapi'])
    expect(run.code, run.stderr).toBe(0)
    expect(JSON.parse(run.stdout)).toEqual(openApiDocument())
    expect(run.stdout.endsWith('}\n')).toBe(true)
  })

  it('--out writes the same document to a file of mode 0600, replacing a wider existing one', async () => {
    const file = join(dir, 'openapi.json')
    const run = await cli(['openapi', '--out', file])
    expect(run.code, run.stderr).toBe(0)
    expect(run.stdout).toContain(`to ${file}.`)
    expect(readFileSync(file, 'utf8')).toBe((await cli(['openapi'])).stdout)
    expect(statSync(file).mode & 0o777).toBe(0o600)

    const existing = join(dir, 'existing.json')
    writeFileSync(existing, 'old', { mode: 0o644 })
    const json = await cli(['openapi', '--out', existing, '--json'])
    expect(json.code, json.stderr).toBe(0)
    expect(JSON.parse(json.stdout)).toEqual({ path: existing, bytes: Buffer.byteLength(readFileSync(existing)) })
    expect(JSON.parse(readFileSync(existing, 'utf8'))).toEqual(openApiDocument())
    expect(statSync(existing).mode & 0o777).toBe(0o600)
  })

  it('a path that cannot be written is CLI_OUTPUT_INVALID (exit 1), and no temporary file is left', async () => {
    const box = join(dir, 'box')
    mkdirSync(box)
    mkdirSync(join(box, 'a-directory'))
    writeFileSync(join(box, 'a-file'), 'x')
    const cases: Array<[string, string]> = [
      [join(box, 'missing', 'openapi.json'), 'is in a directory that does not exist'],
      [join(box, 'a-directory'), 'is a directory'],
      [join(box, 'a-file', 'openapi.json'), 'has a parent that is not a directory'],
      [`${box}/`, 'names no file'],
    ]
    for (const [path, why] of cases) {
      const run = await cli(['openapi', '--out', path])
      expect({ path, code: run.code, stdout: run.stdout }).toEqual({ path, code: 1, stdout: '' })
      expect(run.stderr).toBe(`dsh: --out '${path}' ${why}; name a file in an existing, writable directory. (CLI_OUTPUT_INVALID)\n`)
      const json = await cli(['openapi', '--out', path, '--json'])
      expect(JSON.parse(json.stdout)).toMatchObject({ error: { code: 'CLI_OUTPUT_INVALID' } })
    }
    expect(readdirSync(box).sort()).toEqual(['a-directory', 'a-file'])
    expect(readdirSync(join(box, 'a-directory'))).toEqual([])
  })

  it('refuses an existing FIFO or symlink at --out (CLI_OUTPUT_INVALID) and leaves it as it is', async () => {
    const box = join(dir, 'special')
    mkdirSync(box)
    const fifo = join(box, 'a-fifo')
    execFileSync('mkfifo', ['-m', '600', fifo])
    const target = join(box, 'target.json')
    writeFileSync(target, 'kept', { mode: 0o600 })
    const link = join(box, 'a-link')
    symlinkSync(target, link)
    const dangling = join(box, 'a-dangling-link')
    symlinkSync(join(box, 'nowhere.json'), dangling)
    for (const [path, kind] of [
      [fifo, 'a FIFO'],
      [link, 'a symbolic link'],
      [dangling, 'a symbolic link'],
    ] as const) {
      const run = await cli(['openapi', '--out', path])
      expect({ path, code: run.code, stdout: run.stdout }).toEqual({ path, code: 1, stdout: '' })
      expect(run.stderr).toMatch(
        new RegExp(
          `^dsh: --out '${path}' is ${kind}, which is never replaced; name a regular file or a new path.*\\(CLI_OUTPUT_INVALID\\)\n$`,
        ),
      )
      const json = await cli(['openapi', '--out', path, '--json'])
      expect(JSON.parse(json.stdout)).toMatchObject({ error: { code: 'CLI_OUTPUT_INVALID' } })
    }
    expect(lstatSync(fifo).isFIFO()).toBe(true)
    expect(readlinkSync(link)).toBe(target)
    expect(readlinkSync(dangling)).toBe(join(box, 'nowhere.json'))
    expect(readFileSync(target, 'utf8')).toBe('kept')
    expect(readdirSync(box).sort()).toEqual(['a-dangling-link', 'a-fifo', 'a-link', 'target.json'])
  })

  it('takes no positional arguments (CLI_USAGE, exit 2)', async () => {
    const run = await cli(['openapi', 'extra'])
    expect(run.code).toBe(2)
    expect(run.stderr).toContain('CLI_USAGE')
  })
})
