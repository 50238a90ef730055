import { existsSync, mkdirSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { answer, startModelServer } from '@dsh/driver-openai/testing'
import { COMPACT_MAX_KEEP } from '@dsh/protocol'
import { describe, expect, it } from 'vitest'
import { compactionEvents, conversation, model, scratch } from './support/conversation.js'
import { cleanEnv, dshRun, dshStart, history, until } from './support/dsh-process.js'

// `dsh compact` stopped by a signal, and the arguments it refuses before it
// touches a root: the built CLI in its own process, a local Chat Completions
// server (the only fake) holding the summary, so the signal lands while the
// compaction is open (an order of events: the server says it holds the
// request, the CLI says the compaction started).

const KEY = 'sk-e2e-41c7a9d2e8b3'
const t = scratch('dsh-compact-cancel-')
const env = (): NodeJS.ProcessEnv => cleanEnv({ DSH_API_KEY: KEY, DSH_STORE: '', DSH_DATABASE_URL: '' })
const dsh = (args: readonly string[]) => dshRun(args, env())

describe('dsh compact, cancelled by a signal', () => {
  for (const [signal, status, word] of [
    ['SIGINT', 130, 'interrupted'],
    ['SIGTERM', 143, 'terminated'],
  ] as const) {
    it(`${signal} while the summary is pending ends the compaction cancelled, exits ${status} with a CANCELLED document under --json`, async () => {
      // The first summary is held (the model never answers it); the next one is answered.
      t.server = await startModelServer(model((n) => (n === 1 ? { kind: 'stream', hangAfter: 0 } : answer([`summary ${n}`]))))
      const id = await conversation(t.server, t.root, env())

      const running = dshStart(['compact', id, '--keep', '2', '--root', t.root, '--base-url', t.server.baseURL, '--json'], env())
      try {
        await t.server.hung()
        await until(() => running.output().includes('dsh: compaction started'), 'the compaction to start')
        running.child.kill(signal)
        expect(await running.exited, running.output()).toBe(status)
      } finally {
        running.child.kill('SIGKILL')
      }
      const output = running.output()
      expect(output).toContain(`dsh: ${word}: the compaction is cancelled`)
      // stdout is one JSON document (stderr lines start with `dsh:`), the error typed.
      const document = output
        .split('\n')
        .filter((line) => !line.startsWith('dsh: '))
        .join('\n')
      expect(JSON.parse(document)).toEqual({
        error: { code: 'CANCELLED', message: `The compaction of session '${id}' was cancelled (${signal}); the context is unchanged.` },
      })

      // The log closes the compaction: nothing is left compacting, the context is the one before.
      expect(compactionEvents(await history(id, t.root, env()))).toEqual([
        ['compaction/start', undefined],
        ['compaction/end', 'cancelled'],
      ])
      const context = await dsh(['show', id, '--context', '--json', '--root', t.root])
      expect(context.code, context.stderr).toBe(0)
      expect(JSON.parse(context.stdout)).toMatchObject({ compacting: false })

      // The next compaction runs as if none had been tried.
      const again = await dsh(['compact', id, '--keep', '2', '--root', t.root, '--base-url', t.server.baseURL, '--json'])
      expect(again.code, again.stdout + again.stderr).toBe(0)
      expect(JSON.parse(again.stdout)).toMatchObject({ shadowed: 4 })
    })
  }

  it('without --json, the signal is one stderr line after the progress, and stdout stays empty', async () => {
    t.server = await startModelServer(model(() => ({ kind: 'stream', hangAfter: 0 })))
    const id = await conversation(t.server, t.root, env())
    const running = dshStart(['compact', id, '--root', t.root, '--base-url', t.server.baseURL], env())
    let stdout = ''
    running.child.stdout!.on('data', (part: Buffer) => (stdout += part.toString()))
    try {
      await t.server.hung()
      await until(() => running.output().includes('dsh: compaction started'), 'the compaction to start')
      running.child.kill('SIGINT')
      expect(await running.exited).toBe(130)
    } finally {
      running.child.kill('SIGKILL')
    }
    expect(stdout).toBe('')
    expect(
      running
        .output()
        .split('\n')
        .filter((line) => line.length > 0),
    ).toEqual([
      'dsh: compaction started',
      'dsh: interrupted: the compaction is cancelled and the context stays as it was (Ctrl-C again to quit at once)',
    ])
  })
})

describe('dsh compact, refused before the root is touched', () => {
  it('a missing --root, or a directory that is no root, is CLI_ROOT_INVALID and nothing is created', async () => {
    const missing = join(t.dir, 'missing')
    const empty = join(t.dir, 'empty')
    mkdirSync(empty)
    for (const at of [missing, empty]) {
      const result = await dsh([
        'compact',
        '00000000-0000-4000-8000-000000000000',
        '--root',
        at,
        '--base-url',
        'http://127.0.0.1:9/v1',
        '--json',
      ])
      expect(result.code, result.stderr).toBe(1)
      expect(JSON.parse(result.stdout).error.code).toBe('CLI_ROOT_INVALID')
    }
    expect(existsSync(missing)).toBe(false)
    expect(readdirSync(empty)).toEqual([])
  })

  it(`--keep past ${COMPACT_MAX_KEEP} (the HTTP API's cap), past a safe integer, or not a whole number is CLI_USAGE naming the range`, async () => {
    for (const keep of [String(COMPACT_MAX_KEEP + 1), '99999999999999999999', '1e3', '2.5', '-1', '']) {
      const result = await dsh(['compact', 'some-id', `--keep=${keep}`, '--root', join(t.dir, 'nowhere'), '--json'])
      expect([result.code, JSON.parse(result.stdout).error], keep).toEqual([
        2,
        { code: 'CLI_USAGE', message: `--keep must be an integer from 0 to ${COMPACT_MAX_KEEP}, got '${keep}'.` },
      ])
    }
    expect(existsSync(join(t.dir, 'nowhere'))).toBe(false)
  })
})
