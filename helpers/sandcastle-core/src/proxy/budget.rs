//! Spend reserved before a model request goes on and settled when its answer ends, so requests in
//! flight cannot together pass a budget.
//!
//! A request's worst case is the most the meter (`meter.rs`) could charge for it: its `max_tokens`
//! at the model's output price, and a prompt as long as the model's context window (the API
//! refuses a longer one) at the dearest input price the meter knows, a cache write. The body's
//! size is no bound: an image or a PDF page costs more tokens than its bytes.
use super::Work;
use super::meter::{Metered, Price};
use crate::stream::Usage;
use serde::Deserialize;
use std::sync::Arc;

/// The longest prompt the API takes: a model's context window, and with the long-context beta.
const CONTEXT_TOKENS: u64 = 200_000;
const LONG_CONTEXT_TOKENS: u64 = 1_000_000;
/// The `anthropic-beta` flag that opens the long context window (`context-1m-2025-08-07`).
const LONG_CONTEXT_BETA: &str = "context-1m";

/// The two fields of a Messages request the worst case needs; the rest is skipped unread.
#[derive(Deserialize)]
struct Asked {
    model: String,
    max_tokens: u64,
}

/// The most a Messages request may cost in US dollars, from its body and its `anthropic-beta`
/// header; `Err` says why the body is not a request the API would take.
pub fn worst_case(body: &[u8], betas: &str) -> Result<f64, String> {
    let asked: Asked = serde_json::from_slice(body).map_err(|e| {
        format!("the request body is not a Messages request with model and max_tokens: {e}")
    })?;
    let context = if betas.contains(LONG_CONTEXT_BETA) {
        LONG_CONTEXT_TOKENS
    } else {
        CONTEXT_TOKENS
    };
    let worst = Usage {
        cache_creation_input_tokens: context,
        output_tokens: asked.max_tokens,
        ..Usage::default()
    };
    Ok(Price::of(&asked.model).cost(&worst))
}

/// Settled spend and the worst cases of the requests in flight, against one limit.
#[derive(Default)]
pub struct Ledger {
    pub spent: f64,
    reserved: f64,
    in_flight: u32,
}

/// Whether a request may go on now.
pub enum Verdict {
    Go,
    /// The limit is reached: nothing more goes on.
    Reached {
        spent: f64,
    },
    /// What is left is held by requests in flight: once they settle there may be room.
    Held {
        left: f64,
    },
}

impl Ledger {
    /// A request whose worst case is `worst` goes on while the limit is not reached and either its
    /// worst case fits in what the requests in flight leave, or none is in flight: one request
    /// alone may still pass the limit, as the last of a sequence always could; requests side by
    /// side never do.
    pub fn verdict(&self, before: f64, limit: Option<f64>, worst: f64) -> Verdict {
        let Some(limit) = limit else {
            return Verdict::Go;
        };
        let spent = before + self.spent;
        if spent >= limit {
            return Verdict::Reached { spent };
        }
        if self.in_flight == 0 || spent + self.reserved + worst <= limit {
            return Verdict::Go;
        }
        Verdict::Held {
            left: limit - spent - self.reserved,
        }
    }

    pub fn reserve(&mut self, worst: f64) {
        self.reserved += worst;
        self.in_flight += 1;
    }

    pub fn settle(&mut self, worst: f64, cost: f64) {
        self.reserved = (self.reserved - worst).max(0.0);
        self.in_flight = self.in_flight.saturating_sub(1);
        self.spent += cost;
    }
}

/// What an answer is charged when it ends.
pub enum Charge {
    /// Nothing was billed: the API answered an error, or was never reached.
    Nothing,
    /// What the meter read of the answer; an answer whose final usage it did not read is charged at
    /// least its reservation, since what the API billed is unknown.
    Read(Metered),
}

impl Charge {
    /// The usage to record for a request reserved at `worst`.
    pub fn usage(self, worst: f64) -> Usage {
        match self {
            Charge::Nothing => Usage::default(),
            Charge::Read(Metered::Final(usage)) => usage,
            Charge::Read(Metered::Partial(usage)) => {
                let mut usage = usage.unwrap_or_default();
                usage.cost_usd = usage.cost_usd.max(worst);
                usage
            }
        }
    }
}

/// A request's worst case, held against the work's and the run's budgets until it settles;
/// dropped unsettled, it is charged whole.
pub struct Reservation {
    work: Arc<Work>,
    worst: f64,
    settled: bool,
}

impl Reservation {
    /// Held already in both ledgers (`Work::reserve`).
    pub(super) fn held(work: Arc<Work>, worst: f64) -> Reservation {
        Reservation {
            work,
            worst,
            settled: false,
        }
    }

    pub fn settle(mut self, charge: Charge) {
        self.work.settle(self.worst, &charge.usage(self.worst));
        self.settled = true;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.settled {
            let worst = Charge::Read(Metered::Partial(None)).usage(self.worst);
            self.work.settle(self.worst, &worst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_case_is_a_full_context_window_written_to_the_cache_and_every_output_token() {
        let body = br#"{"model":"claude-sonnet-4-6","max_tokens":32000,"messages":[{"role":"user","content":"hi"}]}"#;
        let sonnet = (200_000.0 * 3.0 * 1.25 + 32_000.0 * 15.0) / 1e6;
        assert!((worst_case(body, "").unwrap() - sonnet).abs() < 1e-9);
        let long = (1_000_000.0 * 3.0 * 1.25 + 32_000.0 * 15.0) / 1e6;
        let betas = "interleaved-thinking-2025-05-14,context-1m-2025-08-07";
        assert!((worst_case(body, betas).unwrap() - long).abs() < 1e-9);
        let error = worst_case(br#"{"model":"claude-sonnet-4-6"}"#, "").unwrap_err();
        assert!(error.contains("max_tokens"), "{error}");
    }

    #[test]
    fn requests_side_by_side_never_pass_the_limit_and_one_alone_may_go_while_it_is_not_reached() {
        let mut ledger = Ledger::default();
        assert!(matches!(ledger.verdict(0.0, Some(5.0), 2.0), Verdict::Go));
        ledger.reserve(2.0);
        assert!(matches!(ledger.verdict(0.0, Some(5.0), 2.0), Verdict::Go));
        ledger.reserve(2.0);
        assert!(matches!(
            ledger.verdict(0.0, Some(5.0), 2.0),
            Verdict::Held { left } if (left - 1.0).abs() < 1e-9
        ));
        ledger.settle(2.0, 0.5);
        ledger.settle(2.0, 4.0);
        // $4.50 spent, nothing in flight: a lone request may go, past the limit at worst.
        assert!(matches!(ledger.verdict(0.0, Some(5.0), 2.0), Verdict::Go));
        assert!(matches!(
            ledger.verdict(0.5, Some(5.0), 2.0),
            Verdict::Reached { spent } if (spent - 5.0).abs() < 1e-9
        ));
        assert!(matches!(ledger.verdict(100.0, None, 2.0), Verdict::Go));
    }

    #[test]
    fn an_answer_whose_final_usage_was_not_read_is_charged_its_reservation() {
        let partial = Usage {
            input_tokens: 10,
            cost_usd: 0.01,
            ..Usage::default()
        };
        let charged = Charge::Read(Metered::Partial(Some(partial))).usage(2.0);
        assert_eq!((charged.input_tokens, charged.cost_usd), (10, 2.0));
        assert_eq!(
            Charge::Read(Metered::Partial(None)).usage(2.0).cost_usd,
            2.0
        );
        assert_eq!(Charge::Nothing.usage(2.0).cost_usd, 0.0);
        let read = Usage {
            output_tokens: 5,
            cost_usd: 0.3,
            ..Usage::default()
        };
        assert_eq!(Charge::Read(Metered::Final(read)).usage(2.0).cost_usd, 0.3);
    }
}
