import { ClientError } from '../src/index.js'

/** Awaits a call that must fail with a `ClientError` and returns that error. */
export async function failure(promise: Promise<unknown>): Promise<ClientError> {
  try {
    await promise
  } catch (error) {
    if (error instanceof ClientError) return error
    throw error
  }
  throw new Error('expected the call to fail')
}
