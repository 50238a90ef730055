import { createModelClient, createOpenAISummarizer } from '@dsh/driver-openai'
import type { Host } from '@dsh/host'
import { COMPACT_MAX_KEEP } from '@dsh/protocol'
import { type Session, SessionId } from '@dsh/session'
import { type CommandIo, intOption, onePositional, type ParsedCommand } from '../command.js'
import { openHost, warnIfExposed } from '../host-access.js'
import { interruptedStatus, untilInterrupted } from '../interrupt.js'
import { printJson } from '../output.js'
import { safe } from '../terminal.js'

/**
 * `dsh compact <id> [--keep N] [--model M] [--base-url URL]`: summarizes all
 * but the newest N context messages of a session through an
 * OpenAI-compatible model and appends the compaction to its log
 * (`compaction/start`, `/summary`, `/end`); nothing already in the log
 * changes, so `dsh show` still lists every event. `--keep` is an integer
 * from 0 to `COMPACT_MAX_KEEP` (the HTTP API's cap), else `CLI_USAGE`. The
 * root must exist (`CLI_ROOT_INVALID` otherwise; nothing is created). The
 * session is loaded as a writer: crash repair closes a compaction a killed
 * process left open, and a session another process is writing is refused
 * with `SESSION_PERSISTENCE_LOCKED`. A failed summary leaves `compaction/end
 * {error}` and exits 1 (`COMPACTION_SUMMARIZER_FAILED`). SIGINT (Ctrl-C) or
 * SIGTERM cancels the compaction (`compaction/end {error: 'cancelled'}`
 * once it started; the context is unchanged) and exits 130 (143), with a
 * `CANCELLED` error document under --json. The API key comes from
 * DSH_API_KEY or OPENAI_API_KEY only.
 */
export async function run(command: ParsedCommand, io: CommandIo): Promise<number> {
  const id = onePositional(command, 'session id')
  const keep = intOption(command, 'keep', { max: COMPACT_MAX_KEEP })
  const model = command.string('model')
  const baseURL = command.string('base-url')
  const client = createModelClient({
    env: io.env,
    ...(model === undefined ? {} : { model }),
    ...(baseURL === undefined ? {} : { baseURL }),
  })
  // Each stage is reported once its events are durable (stderr, so --json output stays one document).
  const onProgress = (stage: string): void => void io.err.write(`dsh: compaction ${stage}\n`)
  let host: Host | undefined
  try {
    // A signal while the host opens or the session loads cancels the compaction before it writes anything.
    const outcome = await untilInterrupted(io, 'the compaction is cancelled and the context stays as it was', async (signal) => {
      host = await openHost(
        command,
        { requireExisting: true, summarizer: createOpenAISummarizer({ client }), compaction: { onProgress } },
        io,
      )
      warnIfExposed(host.root, io)
      const session: Session = host.sessions.get(id) ?? host.sessions.restore(await host.persistence.load(SessionId(id)))
      const result = await host.ctx
        .require('compaction')
        .compact(session, { reason: 'manual', signal, ...(keep === undefined ? {} : { keep }) })
      return { session, result }
    })
    if ('interrupted' in outcome) {
      if (command.json)
        printJson(
          {
            error: {
              code: 'CANCELLED',
              message: `The compaction of session '${id}' was cancelled (${outcome.interrupted}); the context is unchanged.`,
            },
          },
          io.out,
        )
      return interruptedStatus(outcome.interrupted)
    }
    const { session, result } = outcome.done
    if (command.json) printJson(result, io.out)
    else
      io.out.write(
        safe`compacted ${session.id}: ${result.shadowed} message(s), events [${result.from}, ${result.to}) summarized; about ${result.tokensBefore} -> ${result.tokensAfter} tokens\n`,
      )
    return 0
  } finally {
    await host?.dispose()
  }
}
