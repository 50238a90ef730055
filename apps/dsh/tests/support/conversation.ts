import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { answer, type ModelServer, type RecordedRequest, type Reply } from '@dsh/driver-openai/testing'
import { afterEach, beforeEach, expect } from 'vitest'
import { dshRun, type Event } from './dsh-process.js'

/** The last user message of a summarize request (the compactor's prompt) starts so. */
export const SUMMARIZE = /^Summarize the conversation above/

/** Where a test runs: `root` inside a fresh temp dir `dir`, and the model server it starts, if any. */
export interface Scratch {
  readonly dir: string
  readonly root: string
  server: ModelServer | undefined
}

/**
 * Registers the hooks that give each test of the file a fresh temp dir (named
 * from `prefix`) with a `root` path inside it (not created), and close the
 * test's `server` and remove the dir after it.
 */
export function scratch(prefix: string): Scratch {
  const current = { dir: '', root: '', server: undefined as ModelServer | undefined }
  beforeEach(() => {
    current.dir = mkdtempSync(join(tmpdir(), prefix))
    current.root = join(current.dir, 'root')
  })
  afterEach(async () => {
    await current.server?.close()
    current.server = undefined
    rmSync(current.dir, { recursive: true, force: true })
  })
  return current
}

/** The text of the request's last user message ('' when there is none). */
export const lastUser = (request: RecordedRequest) => String(request.body.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '')
export const isSummarize = (request: RecordedRequest) => SUMMARIZE.test(lastUser(request))

/** A model that answers each prompt with a long text, and the n-th summary with `summary(n)` (a reply, or a hold). */
export function model(summary: (n: number) => Reply): (request: RecordedRequest) => Reply {
  let summaries = 0
  return (request) => (isSummarize(request) ? summary(++summaries) : answer([`About "${lastUser(request)}": `, 'many words. '.repeat(80)]))
}

/** One turn of `dsh run` in one session for each of `prompts` (in `root`, against `server`, in `env`); the session's id. */
export async function conversation(
  server: ModelServer,
  root: string,
  env: NodeJS.ProcessEnv,
  prompts: readonly string[] = ['first question', 'second question', 'third question'],
): Promise<string> {
  const [opening, ...rest] = prompts
  const first = await dshRun(['run', opening!, '--root', root, '--base-url', server.baseURL], env)
  expect(first.code, first.stdout + first.stderr).toBe(0)
  const id = /^session (\S+)$/m.exec(first.stdout)![1]!
  for (const prompt of rest) {
    const next = await dshRun(['run', '--resume', id, prompt, '--root', root, '--base-url', server.baseURL], env)
    expect(next.code, next.stdout + next.stderr).toBe(0)
  }
  return id
}

/** The compaction events of a log, each as its type and error (undefined when none). */
export const compactionEvents = (events: readonly Event[]) =>
  events.filter((e) => e.type.startsWith('compaction/')).map((e) => [e.type, e.data.error])
