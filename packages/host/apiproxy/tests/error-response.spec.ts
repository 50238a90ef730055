import { DshError } from '@dsh/context'
import { describe, expect, it } from 'vitest'
import { ERROR_MESSAGE_MAX_CHARS, toErrorResponse, wireProblem } from '../src/error-response.js'
import { API_ERROR_STATUS, ApiError, type ApiErrorCode } from '../src/errors.js'

const leaky = 'at /srv/dsh/root/c2Vzc2lvbg/log.jsonl.zst byte 4096: EISDIR: illegal operation on a directory, read (errno -21)'

function expectPathFree(message: string): void {
  expect(message).not.toMatch(/\/srv|log\.jsonl|byte \d|EISDIR|errno|-21/)
}

describe('toErrorResponse', () => {
  it('answers every host code with its status and body', () => {
    for (const [code, status] of Object.entries(API_ERROR_STATUS)) {
      const response = toErrorResponse(new ApiError(code as ApiErrorCode, `because ${code}`))
      expect(response.status).toBe(status)
      expect(response.body).toEqual({ code, message: `because ${code}` })
    }
  })

  it("passes a caller's-mistake service code through with its status and message", () => {
    const cases: Array<[string, number]> = [
      ['SESSION_QUERY_NOT_FOUND', 404],
      ['SESSION_QUERY_INVALID_FILTER', 400],
      ['SESSION_QUERY_INVALID_CURSOR', 400],
      ['SESSION_QUERY_STALE_CURSOR', 409],
      ['SUBAGENT_NOT_FOUND', 404],
      ['SUBAGENT_INVALID_ARGUMENT', 400],
      ['SUBAGENT_UNAUTHORIZED', 403],
      ['SESSION_PERSISTENCE_LOCKED', 409],
      ['CANCELLED', 499],
    ]
    for (const [code, status] of cases) {
      const response = toErrorResponse(new DshError(code, `message for ${code}`))
      expect([code, response.status, response.redacted]).toEqual([code, status, false])
      expect(response.body).toEqual({ code, message: `message for ${code}` })
    }
  })

  it('keeps the code of a damaged entry or a failing backend but replaces its message with a path-free one', () => {
    const cases: Array<[string, number, boolean]> = [
      ['SESSION_QUERY_CORRUPT_SESSION', 422, false],
      ['SESSION_QUERY_PERSISTENCE_FAILED', 503, true],
      ['SESSION_QUERY_INDEX_FAILED', 503, true],
      // Budgets are refusals the host means to make: redacted and logged, not faults.
      ['SESSION_QUERY_BUDGET_EXCEEDED', 503, false],
      ['SESSION_QUERY_TIMEOUT', 503, false],
      ['SUBAGENT_CONTROL_QUERY_UNAVAILABLE', 503, true],
      ['SOMETHING_ELSE', 500, true],
    ]
    for (const [code, status, fault] of cases) {
      const response = toErrorResponse(new DshError(code, `Persistence failed ${leaky}`, { details: { id: 'bravo-3' } }))
      expect([code, response.status, response.serverFault, response.redacted]).toEqual([code, status, fault, true])
      expect(response.body.code).toBe(code)
      expectPathFree(response.body.message)
    }
    expect(toErrorResponse(new DshError('SESSION_QUERY_CORRUPT_SESSION', leaky, { details: { id: 'bravo-3' } })).body.message).toContain(
      "Session 'bravo-3' is damaged",
    )
    expect(toErrorResponse(new DshError('SESSION_QUERY_BUDGET_EXCEEDED', leaky)).body.message).toContain('fewer or rarer search words')
  })

  it("keeps the message of a compaction's model failure or missing model (5xx written for the caller), and of a useless summary (409)", () => {
    const cases: Array<[string, number, boolean]> = [
      ['COMPACTION_SUMMARIZER_FAILED', 502, true],
      // The host's configuration, as API_COMPACTION_UNAVAILABLE: a refusal, not a fault.
      ['COMPACTION_NO_SUMMARIZER', 501, false],
      ['COMPACTION_NO_GAIN', 409, false],
      ['COMPACTION_NOTHING_TO_COMPACT', 409, false],
      ['COMPACTION_BUSY', 409, false],
    ]
    for (const [code, status, fault] of cases) {
      const message = `Compaction of session 'a' failed: The model server failed (HTTP 500): down. (${code})`
      const response = toErrorResponse(new DshError(code, message))
      expect([code, response.status, response.serverFault, response.redacted]).toEqual([code, status, fault, false])
      expect(response.body).toEqual({ code, message })
    }
  })

  it('bounds a service message it keeps to ERROR_MESSAGE_MAX_CHARS characters, an ellipsis included', () => {
    const upstream = `Compaction of session 'a' failed: The model server failed (HTTP 500): ${'<html>'.repeat(5_000)}`
    for (const code of ['COMPACTION_SUMMARIZER_FAILED', 'SESSION_QUERY_INVALID_FILTER']) {
      const { message } = toErrorResponse(new DshError(code, upstream)).body
      expect(message).toHaveLength(ERROR_MESSAGE_MAX_CHARS)
      expect(message).toBe(`${upstream.slice(0, ERROR_MESSAGE_MAX_CHARS - 1)}…`)
    }
    expect(wireProblem({ code: 'SESSION_QUERY_NOT_FOUND', message: upstream }).message).toHaveLength(ERROR_MESSAGE_MAX_CHARS)
    // A surrogate pair is never split at the bound.
    const emoji = toErrorResponse(new DshError('COMPACTION_SUMMARIZER_FAILED', `${'x'.repeat(ERROR_MESSAGE_MAX_CHARS - 2)}😀tail`)).body
      .message
    expect(emoji).toBe(`${'x'.repeat(ERROR_MESSAGE_MAX_CHARS - 2)}…`)
  })

  it('answers a flush persistence did not take as a 503 with the fixed storage message (the events stay in memory for a retry)', () => {
    const response = toErrorResponse(new DshError('SESSION_FLUSH_FAILED', `Flushing session 'a' failed: ${leaky}`))
    expect([response.status, response.serverFault, response.redacted]).toEqual([503, true, true])
    expect(response.body.code).toBe('SESSION_FLUSH_FAILED')
    expectPathFree(response.body.message)
  })

  it('hides the details of unexpected errors and marks them as server faults', () => {
    const response = toErrorResponse(new TypeError(`secret internal detail ${leaky}`))
    expect(response.status).toBe(500)
    expect(response.body.code).toBe('API_INTERNAL')
    expect(response.body.message).not.toContain('secret')
    expectPathFree(response.body.message)
    expect(response.serverFault).toBe(true)
    expect(toErrorResponse(new ApiError('API_NOT_FOUND', 'x')).serverFault).toBe(false)
    // Configured refusals are not faults; a failing persistence is.
    expect(toErrorResponse(new ApiError('API_SEARCH_UNAVAILABLE', 'x')).serverFault).toBe(false)
    expect(toErrorResponse(new ApiError('API_TOO_MANY_STREAMS', 'x')).serverFault).toBe(false)
    expect(toErrorResponse(new DshError('SESSION_QUERY_PERSISTENCE_FAILED', 'x')).serverFault).toBe(true)
  })
})

describe('wireProblem', () => {
  it("keeps a caller's mistake as it is, and gives a damaged, failing or uncoded problem a fixed message", () => {
    const path = 'Session log /srv/dsh/a/log.jsonl.zst is corrupt at byte 815'
    expect(wireProblem({ code: 'SESSION_QUERY_NOT_FOUND', message: "Session 'a' does not exist." })).toEqual({
      code: 'SESSION_QUERY_NOT_FOUND',
      message: "Session 'a' does not exist.",
    })
    for (const problem of [
      { code: 'SESSION_PERSISTENCE_CORRUPT', message: path },
      { code: 'SESSION_PERSISTENCE_IO', message: `${path}: EIO` },
      { message: path },
    ]) {
      const wire = wireProblem(problem)
      expect(wire.code).toBe(problem.code)
      expect(wire.message).not.toContain('/srv/dsh')
      expect(wire.message.length).toBeGreaterThan(0)
    }
  })
})
