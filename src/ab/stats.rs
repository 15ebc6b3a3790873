//! Summary statistics and Student's t confidence intervals for paired differences.
//!
//! The t quantile is computed, not looked up: the t distribution's CDF is written with the
//! regularized incomplete beta function (continued fraction, Lentz's method, as in Numerical
//! Recipes §6.4) and inverted by bisection, so any confidence level and any number of degrees
//! of freedom work.

/// Mean, sample standard deviation and a two-sided Student's t confidence interval of the mean.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n - 1 in the denominator); 0 for n < 2.
    pub sd: f64,
    /// The interval; `None` when n < 2 (no degrees of freedom).
    pub ci: Option<(f64, f64)>,
    pub confidence: f64,
}

impl Summary {
    pub fn of(xs: &[f64], confidence: f64) -> Summary {
        let n = xs.len();
        let mean = if n == 0 { f64::NAN } else { xs.iter().sum::<f64>() / n as f64 };
        if n < 2 {
            return Summary { n, mean, sd: 0.0, ci: None, confidence };
        }
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1) as f64;
        let sd = var.sqrt();
        let half = t_quantile(0.5 + confidence / 2.0, (n - 1) as f64) * sd / (n as f64).sqrt();
        Summary { n, mean, sd, ci: Some((mean - half, mean + half)), confidence }
    }

    /// Whether the interval contains `x` (false without an interval).
    pub fn includes(&self, x: f64) -> bool {
        self.ci.is_some_and(|(lo, hi)| lo <= x && x <= hi)
    }
}

/// ln Γ(x) for x > 0 (Lanczos approximation, g = 7, 9 terms; relative error ~1e-15).
pub fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x) Γ(1 - x) = π / sin(πx).
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + G + 0.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The regularized incomplete beta function I_x(a, b) for a, b > 0 and 0 <= x <= 1.
pub fn inc_beta(x: f64, a: f64, b: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    // The continued fraction converges fast for x < (a + 1) / (a + b + 2); use the symmetry
    // I_x(a, b) = 1 - I_{1-x}(b, a) otherwise.
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_cf(x, a, b) / a
    } else {
        1.0 - front * beta_cf(1.0 - x, b, a) / b
    }
}

/// The continued fraction of the incomplete beta function, by the modified Lentz method.
fn beta_cf(x: f64, a: f64, b: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..=300 {
        let m = m as f64;
        let m2 = 2.0 * m;
        for aa in [
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ] {
            d = 1.0 + aa * d;
            if d.abs() < TINY {
                d = TINY;
            }
            c = 1.0 + aa / c;
            if c.abs() < TINY {
                c = TINY;
            }
            d = 1.0 / d;
            h *= d * c;
        }
        if (d * c - 1.0).abs() < 1e-16 {
            break;
        }
    }
    h
}

/// The CDF of Student's t distribution with `df` degrees of freedom.
pub fn t_cdf(t: f64, df: f64) -> f64 {
    let tail = 0.5 * inc_beta(df / (df + t * t), df / 2.0, 0.5);
    if t >= 0.0 { 1.0 - tail } else { tail }
}

/// The `p` quantile of Student's t distribution with `df` degrees of freedom (0 < p < 1).
pub fn t_quantile(p: f64, df: f64) -> f64 {
    assert!(p > 0.0 && p < 1.0 && df > 0.0, "t_quantile({p}, {df}) is undefined");
    if p < 0.5 {
        return -t_quantile(1.0 - p, df);
    }
    // The CDF is increasing: bracket, then bisect to the last bit.
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    while t_cdf(hi, df) < p {
        lo = hi;
        hi *= 2.0;
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if t_cdf(mid, df) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Median of a non-empty slice (sorts a copy).
pub fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { 0.5 * (v[n / 2 - 1] + v[n / 2]) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) {
        assert!((a - b).abs() <= tol, "{a} != {b} (tolerance {tol})");
    }

    /// Two-sided 95% critical values (the 0.975 quantile) from standard tables (R's
    /// `qt(0.975, df)`, printed to 9 digits).
    #[test]
    fn t_quantile_matches_tables() {
        for (df, q) in [
            (1.0, 12.706_204_736),
            (2.0, 4.302_652_730),
            (3.0, 3.182_446_305),
            (5.0, 2.570_581_836),
            (9.0, 2.262_157_163),
            (10.0, 2.228_138_852),
            (29.0, 2.045_229_642),
            (30.0, 2.042_272_456),
            (99.0, 1.984_216_952),
            (1000.0, 1.962_339_081),
        ] {
            close(t_quantile(0.975, df), q, 1e-8);
        }
        // Other levels: qt(0.995, 4), qt(0.9995, 20), qt(0.9, 7), qt(0.05, 12) (lower tail).
        close(t_quantile(0.995, 4.0), 4.604_094_871, 1e-8);
        close(t_quantile(0.9995, 20.0), 3.849_516_275, 1e-8);
        close(t_quantile(0.9, 7.0), 1.414_923_928, 1e-8);
        close(t_quantile(0.05, 12.0), -1.782_287_556, 1e-8);
        // Large df tends to the normal quantile 1.959963985.
        close(t_quantile(0.975, 1e7), 1.959_964_0, 1e-6);
    }

    #[test]
    fn t_cdf_known_values() {
        // df = 1 is the Cauchy distribution: F(t) = 1/2 + atan(t)/π.
        for t in [-3.0, -0.5, 0.0, 0.7, 2.0, 10.0] {
            close(t_cdf(t, 1.0), 0.5 + f64::atan(t) / std::f64::consts::PI, 1e-12);
        }
        // df = 2 has F(t) = 1/2 + t / (2 sqrt(2 + t²)).
        for t in [-2.0, 0.3, 1.5, 6.0] {
            close(t_cdf(t, 2.0), 0.5 + t / (2.0 * (2.0 + t * t).sqrt()), 1e-12);
        }
    }

    #[test]
    fn ln_gamma_and_inc_beta_known_values() {
        close(ln_gamma(1.0), 0.0, 1e-13);
        close(ln_gamma(0.5), std::f64::consts::PI.sqrt().ln(), 1e-13);
        close(ln_gamma(10.0), (362_880.0_f64).ln(), 1e-12);
        // I_x(1, 1) = x; I_x(a, 1) = x^a; I_0.5(a, a) = 1/2.
        close(inc_beta(0.3, 1.0, 1.0), 0.3, 1e-13);
        close(inc_beta(0.6, 3.0, 1.0), 0.216, 1e-13);
        close(inc_beta(0.5, 7.5, 7.5), 0.5, 1e-13);
    }

    /// A textbook example: the mean of 2, 4, 4, 4, 5, 5, 7, 9 is 5, the sample sd is
    /// sqrt(32/7), and the 95% interval is 5 ± qt(0.975, 7) * sd / sqrt(8).
    #[test]
    fn summary_of_a_sample() {
        let s = Summary::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0], 0.95);
        close(s.mean, 5.0, 1e-12);
        close(s.sd, (32.0_f64 / 7.0).sqrt(), 1e-12);
        let half = 2.364_624_252 * s.sd / 8.0_f64.sqrt();
        let (lo, hi) = s.ci.unwrap();
        close(lo, 5.0 - half, 1e-8);
        close(hi, 5.0 + half, 1e-8);
        assert!(s.includes(5.0) && !s.includes(3.0));
        assert_eq!(Summary::of(&[1.0], 0.95).ci, None);
        close(median(&[3.0, 1.0, 2.0, 10.0]), 2.5, 0.0);
    }
}
