// The console's entry: routes under /console/, signed-in pages behind the session check.
import { StrictMode, Suspense, lazy, type ReactNode } from "react";
import { createRoot } from "react-dom/client";
import { BrowserRouter, Link, Navigate, Route, Routes, useLocation } from "react-router-dom";
import { Layout } from "./components/Layout";
import { Loading } from "./components/ui";
import { ForgotPassword, ResetPassword, SignIn, SignUp } from "./pages/Auth";
import { Overview } from "./pages/Overview";
import { SessionProvider, useSession } from "./session";
import "./styles.css";

// Pages load on first visit; the chart library comes only with the pages that draw charts.
const Batch = lazy(() => import("./pages/Batch").then((m) => ({ default: m.Batch })));
const Batches = lazy(() => import("./pages/Batches").then((m) => ({ default: m.Batches })));
const Billing = lazy(() => import("./pages/Billing").then((m) => ({ default: m.Billing })));
const Keys = lazy(() => import("./pages/Keys").then((m) => ({ default: m.Keys })));
const Quotes = lazy(() => import("./pages/Quotes").then((m) => ({ default: m.Quotes })));
const Schedules = lazy(() => import("./pages/Schedules").then((m) => ({ default: m.Schedules })));
const ScheduleRuns = lazy(() => import("./pages/Schedules").then((m) => ({ default: m.ScheduleRuns })));
const Settings = lazy(() => import("./pages/Settings").then((m) => ({ default: m.Settings })));
const Usage = lazy(() => import("./pages/Usage").then((m) => ({ default: m.Usage })));

function RequireSession({ children }: { children: ReactNode }) {
  const { session, loading } = useSession();
  const location = useLocation();
  if (loading) return <Loading what="your session" />;
  if (!session) return <Navigate to="/sign-in" replace state={{ from: location.pathname + location.search }} />;
  return <>{children}</>;
}

function NotFound() {
  return (
    <>
      <h1>Page not found</h1>
      <p>This console page does not exist: the link may be old or mistyped.</p>
      <p>
        <Link to="/">Go to the overview</Link> · <Link to="/batches">Batches</Link>
      </p>
    </>
  );
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <BrowserRouter basename="/console">
      <SessionProvider>
        <Suspense fallback={<Loading what="the page" />}>
        <Routes>
          <Route path="/sign-in" element={<SignIn />} />
          <Route path="/sign-up" element={<SignUp />} />
          <Route path="/forgot-password" element={<ForgotPassword />} />
          <Route path="/reset-password" element={<ResetPassword />} />
          <Route
            element={
              <RequireSession>
                <Layout />
              </RequireSession>
            }
          >
            <Route index element={<Overview />} />
            <Route path="batches" element={<Batches />} />
            <Route path="batches/:batchId" element={<Batch />} />
            <Route path="quotes" element={<Quotes />} />
            <Route path="schedules" element={<Schedules />} />
            <Route path="schedules/:scheduleId" element={<ScheduleRuns />} />
            <Route path="usage" element={<Usage />} />
            <Route path="billing" element={<Billing />} />
            <Route path="keys" element={<Keys />} />
            <Route path="settings" element={<Settings />} />
            <Route path="*" element={<NotFound />} />
          </Route>
        </Routes>
        </Suspense>
      </SessionProvider>
    </BrowserRouter>
  </StrictMode>,
);
