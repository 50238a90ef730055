import { z } from 'zod'

/** Every error answer: a stable machine-readable code and a message a person can act on (never a file path or errno). */
export const errorBody = z.object({ code: z.string().min(1), message: z.string() })
